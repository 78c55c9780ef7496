// shardproxy status page: every second, fetch the live part of the page
// (status/live, HTML the server renders and escapes) and swap it in. No
// framework, nothing fetched from elsewhere; without JavaScript the page
// reloads itself (a noscript refresh).
(function () {
  "use strict";
  var every = 1000;
  var updated = document.getElementById("updated");

  function show(text, failed) {
    updated.textContent = text;
    updated.className = failed ? "error" : "muted";
    document.body.classList.toggle("stale", failed);
  }

  // The keys of the open <details>, so that a swap keeps them open.
  function openKeys(root) {
    var keys = {};
    root.querySelectorAll("details[open]").forEach(function (d) {
      var pool = d.closest("[data-pool]");
      keys[(pool ? pool.getAttribute("data-pool") : "") + "\u0000" + d.getAttribute("data-key")] = true;
    });
    return keys;
  }

  function reopen(root, keys) {
    root.querySelectorAll("details").forEach(function (d) {
      var pool = d.closest("[data-pool]");
      if (keys[(pool ? pool.getAttribute("data-pool") : "") + "\u0000" + d.getAttribute("data-key")]) {
        d.open = true;
      }
    });
  }

  function tick() {
    fetch("status/live", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var live = document.getElementById("live");
        if (!fresh || !live) { throw new Error("no live part in the reply"); }
        var keys = openKeys(live);
        live.replaceWith(fresh);
        reopen(fresh, keys);
        show("Updated live every second; last at " + new Date().toLocaleTimeString() + ".", false);
      })
      .catch(function (err) {
        show("Not updating: " + err.message + " (retrying every second); the figures shown are stale.", true);
      })
      .finally(function () { setTimeout(tick, every); });
  }

  show("Updated live every second.", false);
  setTimeout(tick, every);
})();
