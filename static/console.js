// Leasehold console: the little behaviour htmx does not give us (no inline scripts; CSP script-src 'self').
//  * Polling fragments (marked data-poll) skip their requests while the tab is hidden,
//    and refresh at once when it becomes visible again ("lh:refresh" is in their hx-trigger).
//  * Countdowns (data-countdown = seconds left when rendered) tick every second; each
//    polled fragment re-renders them from the server's clock.
//  * A connection problem during polling is shown in the header's live region.
(function () {
  "use strict";

  function fmt(s) {
    var a = Math.abs(s);
    var text = a < 120 ? Math.round(a) + " s" : a < 7200 ? (a / 60).toFixed(1) + " min" : (a / 3600).toFixed(1) + " h";
    return s >= 0 ? text : "expired " + text + " ago";
  }

  function arm(root) {
    var now = performance.now();
    (root.querySelectorAll ? root : document).querySelectorAll("[data-countdown]").forEach(function (el) {
      if (!el.dataset.t0) el.dataset.t0 = String(now);
    });
  }

  function tick() {
    var now = performance.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = parseFloat(el.dataset.countdown) - (now - parseFloat(el.dataset.t0 || now)) / 1000;
      if (!isNaN(left)) el.textContent = fmt(left);
    });
  }

  function live(text) {
    var el = document.getElementById("live");
    if (el) el.textContent = text;
  }

  document.addEventListener("DOMContentLoaded", function () {
    arm(document);
    setInterval(tick, 1000);
  });
  document.addEventListener("htmx:load", function (e) { arm(e.target); });
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (document.visibilityState !== "visible" && elt && elt.hasAttribute("data-poll")) e.preventDefault();
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var xhr = e.detail && e.detail.xhr;
    if (!xhr) return;
    if (xhr.status === 0) live("Connection lost; retrying…");
    else if (xhr.status >= 500) live("Server error " + xhr.status + "; retrying…");
    else live("");
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (el) { window.htmx.trigger(el, "lh:refresh"); });
    }
  });
})();
