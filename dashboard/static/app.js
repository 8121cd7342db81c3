// pacer dashboard: refreshes the overview's table every few seconds and
// keeps the relative times ("in 42 s", "3 min ago") current. The page works
// without it. No framework, no build step.
"use strict";
(function () {
  var skew = 0; // the server's clock minus this browser's, in ms

  function readNow(root) {
    var el = root.querySelector("[data-now]");
    if (!el) return;
    var t = Date.parse(el.getAttribute("data-now"));
    if (!isNaN(t)) skew = t - Date.now();
  }

  // span renders a positive number of ms as the server does
  // (scheduler.Relative): "42 s", "3 min", "2 h 5 min", "3 d".
  function span(ms) {
    var s = Math.max(1, Math.ceil(ms / 1000));
    if (s < 90) return s + " s";
    if (s < 90 * 60) return Math.floor((s + 30) / 60) + " min";
    if (s < 48 * 3600) {
      var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
      return m === 0 ? h + " h" : h + " h " + m + " min";
    }
    return Math.floor(s / 86400) + " d";
  }

  function relative(d) {
    if (d > -1000 && d < 1000) return "now";
    return d > 0 ? "in " + span(d) : span(-d) + " ago";
  }

  function updateTimes() {
    var now = Date.now() + skew;
    var els = document.querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute("datetime"));
      if (!isNaN(t)) els[i].textContent = relative(t - now);
    }
  }

  function refresh(live) {
    if (document.hidden) return;
    fetch(live.getAttribute("data-src"), { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        // The fragment is rendered (and escaped) by the server's templates.
        live.innerHTML = html;
        live.classList.remove("stale");
        readNow(live);
        updateTimes();
      })
      .catch(function () {
        live.classList.add("stale");
      });
  }

  document.addEventListener("DOMContentLoaded", function () {
    readNow(document);
    updateTimes();
    setInterval(updateTimes, 1000);
    var live = document.getElementById("live");
    if (live && live.getAttribute("data-src")) {
      var every = Number(live.getAttribute("data-every")) || 5000;
      setInterval(function () { refresh(live); }, every);
    }
    var state = document.getElementById("state");
    if (state && state.form) {
      state.addEventListener("change", function () { state.form.submit(); });
    }
  });
})();
