package sentinel

import (
	"strings"
	"time"
)

// replicaChannels are the Sentinel events about replicas a Monitor with
// Config.OnReplicas subscribes to as well: one found, one down, one back.
var replicaChannels = []string{"+slave", "+sdown", "-sdown"}

const (
	// switchChannel is the Sentinel event a failover ends with:
	// "<master> <old-ip> <old-port> <new-ip> <new-port>".
	switchChannel = "+switch-master"
	// pingEvery is how often a subscribed connection is pinged, so that a
	// Sentinel that vanished without closing it is noticed within
	// 3*pingEvery.
	pingEvery = time.Second
	// maxBackoff bounds the pause between two subscription attempts.
	maxBackoff = time.Second
)

// subscribe keeps one connection to Sentinel s subscribed to
// +switch-master, reconnecting with a backoff of 100ms doubling to 1s, and
// posts the events for followed masters. Each (re)subscription asks for a
// resolve: events may have been missed while it was down. A lost
// subscription is logged once, and its recovery.
func (m *Monitor) subscribe(s string) {
	defer m.wg.Done()
	backoff := 100 * time.Millisecond
	down := false
	for {
		c, err := m.subscribeOnce(s)
		if err == nil {
			if down {
				m.log.Info("sentinel subscription restored", "sentinel", s)
			}
			down = false
			backoff = 100 * time.Millisecond
			m.stats.subscribed.Add(1)
			m.Refresh()
			err = m.listen(s, c)
			m.stats.subscribed.Add(-1)
			m.forget(s, c)
		}
		select {
		case <-m.stop:
			return
		default:
		}
		if !down {
			m.log.Warn("sentinel subscription down", "sentinel", s, "err", err)
			down = true
		}
		if !m.sleep(backoff) {
			return
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// subscribeOnce dials s, subscribes, and registers the connection for
// Close.
func (m *Monitor) subscribeOnce(s string) (*conn, error) {
	c, err := dial(s, m.cfg.Auth, m.cfg.TLS, m.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	args := []string{"SUBSCRIBE", switchChannel}
	if m.cfg.OnReplicas != nil {
		args = append(args, replicaChannels...)
	}
	v, err := c.do(m.cfg.Timeout, args...)
	if err == nil {
		err = v.err()
	}
	if f, ok := v.arrayHead(); err == nil && (!ok || f != "subscribe") {
		err = badReply("SUBSCRIBE: want a subscribe confirmation")
	}
	if err != nil {
		c.close()
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.close()
		return nil, ErrClosed
	}
	m.subs[s] = c
	return c, nil
}

func (m *Monitor) forget(s string, c *conn) {
	m.mu.Lock()
	if m.subs[s] == c {
		delete(m.subs, s)
	}
	m.mu.Unlock()
	c.close()
}

// listen reads c's messages until it fails, pinging it every pingEvery
// from a goroutine of its own (a subscribed RESP2 connection answers PING
// with ["pong", ""]); every read must arrive within 3*pingEvery.
func (m *Monitor) listen(s string, c *conn) error {
	done := make(chan struct{})
	defer close(done)
	go m.pinger(c, done)
	for {
		v, err := c.read(time.Now().Add(3 * pingEvery))
		if err != nil {
			return err
		}
		if err := v.err(); err != nil {
			return err
		}
		if f, ok := v.strings(); ok && len(f) == 3 && f[0] == "message" {
			m.message(s, f[1], f[2])
		} // else a pong, or another confirmation
	}
}

// pinger pings c every pingEvery until done is closed or a ping fails.
func (m *Monitor) pinger(c *conn, done <-chan struct{}) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if c.send(m.cfg.Timeout, "PING") != nil {
				return
			}
		}
	}
}

// message acts on a message Sentinel s published on channel: a master
// switched (posted to the resolver), or a replica added, down or back
// (the Sentinels asked again), for a master followed.
func (m *Monitor) message(s, channel, payload string) {
	if channel != switchChannel {
		if master, ok := replicaEvent(payload); ok && m.follows(master) {
			m.Refresh()
		}
		return
	}
	if ev, ok := parseSwitch(payload); ok && m.follows(ev.master) {
		ev.sentinel = s
		m.post(ev)
	}
}

// parseSwitch reads a +switch-master payload: "<master> <old-ip>
// <old-port> <new-ip> <new-port>".
func parseSwitch(payload string) (event, bool) {
	f := strings.Fields(payload)
	if len(f) != 5 {
		return event{}, false
	}
	addr, err := joinAddr(f[3], f[4])
	if err != nil {
		return event{}, false
	}
	return event{master: f[0], addr: addr}, true
}

// replicaEvent reads the master name of a +slave, +sdown or -sdown
// payload about a replica: "slave <name> <ip> <port> @ <master> <ip>
// <port>".
func replicaEvent(payload string) (string, bool) {
	f := strings.Fields(payload)
	if len(f) != 8 || f[0] != "slave" || f[4] != "@" {
		return "", false
	}
	return f[5], true
}

// follows reports whether name is one of the masters followed.
func (m *Monitor) follows(name string) bool {
	for _, n := range m.cfg.Masters {
		if n == name {
			return true
		}
	}
	return false
}
