{{/* The name of every object: the release's, with the chart's added unless it holds it. */}}
{{- define "shardproxy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shardproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "shardproxy.labels" -}}
{{ include "shardproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The configuration, parsed; a file that is not YAML fails the render. */}}
{{- define "shardproxy.config" -}}
{{- $cfg := fromYaml (required "config: the proxy's configuration file is required" .Values.config) -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "config: not YAML: %s" $cfg.Error) -}}
{{- end -}}
{{- toJson $cfg -}}
{{- end -}}

{{/* The port of "host:port"; "" for a unix socket's path. */}}
{{- define "shardproxy.port" -}}
{{- if not (hasPrefix "/" .) -}}
{{- regexFind "[0-9]+$" . -}}
{{- end -}}
{{- end -}}

{{/* The ports the proxy serves, as JSON {"ports": [{name, port}]}: each
pool's listen and listen_tags, then stats and admin. A port name is the
pool's (and tag's) name, lowercased, "_" made "-", cut at 15 characters. */}}
{{- define "shardproxy.ports" -}}
{{- $cfg := include "shardproxy.config" . | fromJson -}}
{{- $ports := list -}}
{{- range $name, $pool := $cfg -}}
{{- if and (ne $name "shardproxy") (ne $name "fleet") (kindIs "map" $pool) -}}
{{- $base := $name | lower | replace "_" "-" -}}
{{- with $pool.listen -}}
{{- $p := include "shardproxy.port" . -}}
{{- if $p -}}
{{- $ports = append $ports (dict "name" ($base | trunc 15 | trimSuffix "-") "port" ($p | int)) -}}
{{- end -}}
{{- end -}}
{{- range $tag, $addr := ($pool.listen_tags | default dict) -}}
{{- $p := include "shardproxy.port" $addr -}}
{{- if $p -}}
{{- $ports = append $ports (dict "name" (printf "%s-%s" $base ($tag | lower) | trunc 15 | trimSuffix "-") "port" ($p | int)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $admin := (index $cfg "shardproxy" | default dict) -}}
{{- $stats := .Values.statsPort | int -}}
{{- with $admin.stats_listen -}}
{{- $stats = include "shardproxy.port" . | int -}}
{{- end -}}
{{- $ports = append $ports (dict "name" "stats" "port" $stats) -}}
{{- $http := .Values.adminPort | int -}}
{{- with $admin.admin_listen -}}
{{- if not (or (hasPrefix "0.0.0.0:" .) (hasPrefix ":" .) (hasPrefix "[::]:" .)) -}}
{{- fail (printf "config: shardproxy: admin_listen %s: the kubelet probes /ready and /live on the pod's address; listen on 0.0.0.0" .) -}}
{{- end -}}
{{- $http = include "shardproxy.port" . | int -}}
{{- end -}}
{{- $ports = append $ports (dict "name" "admin" "port" $http) -}}
{{- toJson (dict "ports" $ports "admin" $http "stats" $stats) -}}
{{- end -}}

{{- define "shardproxy.gracePeriod" -}}
{{- $min := add .Values.drain.preStopSeconds .Values.drain.timeoutSeconds -}}
{{- $g := .Values.drain.terminationGracePeriodSeconds | int -}}
{{- if eq $g 0 -}}
{{- $g = add $min 10 -}}
{{- else if le $g (int $min) -}}
{{- fail (printf "drain.terminationGracePeriodSeconds %d: want more than preStopSeconds + timeoutSeconds (%d), or the kubelet kills the proxy in its drain" $g (int $min)) -}}
{{- end -}}
{{- $g -}}
{{- end -}}

{{/* The pod's annotations: the configuration's checksum, which rolls the
pods when it changes, and Prometheus's scrape. */}}
{{- define "shardproxy.podAnnotations" -}}
{{- $p := include "shardproxy.ports" . | fromJson -}}
checksum/config: {{ .Values.config | sha256sum }}
{{- if .Values.metrics.scrape }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ $p.admin | int | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The proxy's container, the same in both layouts. */}}
{{- define "shardproxy.container" -}}
{{- $p := include "shardproxy.ports" . | fromJson -}}
- name: shardproxy
  image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    - -c
    - /etc/shardproxy/shardproxy.yml
    - --admin
    - 0.0.0.0:{{ $p.admin | int }}
    - -s
    - {{ $p.stats | int | quote }}
    - --shutdown-timeout
    - {{ printf "%ds" (.Values.drain.timeoutSeconds | int) }}
    {{- if .Values.etcd.endpoints }}
    - --etcd
    - {{ .Values.etcd.endpoints | quote }}
    - --etcd-prefix
    - {{ required "etcd.prefix: the fleet's key prefix is required with etcd.endpoints" .Values.etcd.prefix | quote }}
    - --fleet-id
    - $(POD_NAME)
    {{- end }}
    {{- range .Values.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  {{- if .Values.etcd.endpoints }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  {{- end }}
  ports:
    {{- range $p.ports }}
    - name: {{ .name }}
      containerPort: {{ .port | int }}
      protocol: TCP
    {{- end }}
  readinessProbe:
    httpGet:
      path: /ready
      port: admin
    periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
    failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
  livenessProbe:
    httpGet:
      path: /live
      port: admin
    periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
    failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ .Values.drain.preStopSeconds }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: config
      mountPath: /etc/shardproxy
      readOnly: true
{{- end -}}

{{- define "shardproxy.volumes" -}}
- name: config
  configMap:
    name: {{ include "shardproxy.fullname" . }}
{{- end -}}
