// Leasehold console: the little behaviour htmx does not give us (no inline scripts; CSP script-src 'self').
//  * Polling fragments (marked data-poll) skip their requests while the tab is hidden,
//    and refresh at once when it becomes visible again ("lh:refresh" is in their hx-trigger).
//  * Countdowns (data-countdown = seconds left when rendered) tick every second; each
//    polled fragment re-renders them from the server's clock.
//  * A connection problem during polling is shown in the header's live region.
//  * A plain form (no htmx) with data-confirm asks before it is sent (htmx forms use hx-confirm).
//  * Row check boxes of the job list (data-row-select, data-select-all): the count is said in
//    #bulk-selected-count and the list's live refresh is skipped while any row is checked.
//  * The new-job form: picking a handler fills in its defaults (data-queue, data-max-retries,
//    data-timeout-s of its option); the payload (data-json-check) must parse as JSON to be sent.
//  * A <details data-fold-on-phone="true"> (the job filters, none set) starts folded on a phone.
//  * Display controls, remembered in localStorage: pause live updates ("lh-live" = "paused"),
//    a slower refresh interval ("lh-interval" = seconds: a poll sooner than that after the
//    fragment's previous one is skipped), and the theme ("lh-theme", applied by theme.js).
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

  function stored(key) {
    try { return window.localStorage.getItem(key) || ""; } catch (e) { return ""; }
  }

  function store(key, value) {
    try {
      if (value) window.localStorage.setItem(key, value); else window.localStorage.removeItem(key);
    } catch (e) { /* storage refused: the choice lasts until the page is left */ }
  }

  var paused = stored("lh-live") === "paused";

  function showLive() {
    var button = document.getElementById("live-toggle");
    if (!button) return;
    button.setAttribute("aria-pressed", paused ? "true" : "false");
    button.textContent = paused ? "Resume live updates" : "Pause live updates";
    live(paused ? "Live updates paused." : "");
  }

  function refreshAll() {
    if (!window.htmx) return;
    document.querySelectorAll("[data-poll]").forEach(function (el) { window.htmx.trigger(el, "lh:refresh"); });
  }

  function controls() {
    var box = document.getElementById("display-controls");
    if (!box) return;
    box.hidden = false;
    var toggle = document.getElementById("live-toggle");
    var interval = document.getElementById("live-interval");
    var theme = document.getElementById("theme-choice");
    interval.value = stored("lh-interval");
    theme.value = stored("lh-theme");
    showLive();
    toggle.addEventListener("click", function () {
      paused = !paused;
      store("lh-live", paused ? "paused" : "");
      showLive();
      if (!paused) refreshAll();
    });
    interval.addEventListener("change", function () { store("lh-interval", interval.value); });
    theme.addEventListener("change", function () {
      store("lh-theme", theme.value);
      if (theme.value) document.documentElement.dataset.theme = theme.value;
      else delete document.documentElement.dataset.theme;
    });
  }

  // A poll (a request with no triggering event) this soon after the fragment's last one is
  // skipped. Kept by fragment id, not on the element: a morph resets its attributes.
  var polledAt = {};
  function tooSoon(elt, evt) {
    var every = parseFloat(stored("lh-interval"));
    if (evt || !every) return false;
    var now = Date.now();
    if (now - (polledAt[elt.id] || 0) < every * 1000 - 250) return true;
    polledAt[elt.id] = now;
    return false;
  }

  document.addEventListener("DOMContentLoaded", function () {
    arm(document);
    setInterval(tick, 1000);
    controls();
    var box = document.querySelector("[data-fold-on-phone='true']");
    if (box && window.matchMedia("(max-width: 720px)").matches) box.open = false;
  });
  document.addEventListener("htmx:load", function (e) { arm(e.target); });
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    if (!elt || !elt.hasAttribute("data-poll")) return;
    var evt = e.detail.requestConfig && e.detail.requestConfig.triggeringEvent;
    if (document.visibilityState !== "visible" || (paused && !evt) || tooSoon(elt, evt)) e.preventDefault();
    else if (elt.querySelector("[data-row-select]:checked")) e.preventDefault();  // keep the selection
  });

  document.addEventListener("change", function (e) {
    var select = e.target;
    if (!select || select.id !== "new-name" || select.tagName !== "SELECT") return;
    var option = select.selectedOptions[0];
    if (!option) return;
    [["new-queue", "queue"], ["new-max_retries", "maxRetries"], ["new-timeout_s", "timeoutS"]].forEach(function (pair) {
      var input = document.getElementById(pair[0]);
      if (input) input.value = option.dataset[pair[1]] || "";
    });
  });
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var sel = form && form.getAttribute && form.getAttribute("data-json-check");
    var field = sel && document.querySelector(sel);
    if (!field) return;
    var out = document.getElementById("payload-error");
    try {
      JSON.parse(field.value || "null");
      field.removeAttribute("aria-invalid");
      if (out) out.textContent = "";
    } catch (err) {
      e.preventDefault();
      field.setAttribute("aria-invalid", "true");
      if (out) out.textContent = "The payload is not JSON: " + err.message;
      field.focus();
    }
  });

  function countSelected() {
    var n = document.querySelectorAll("[data-row-select]:checked").length;
    var out = document.getElementById("bulk-selected-count");
    if (out) out.textContent = n ? n + " row(s) selected; the list stops refreshing until none is." : "No row selected.";
  }
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!box || !box.matches) return;
    if (box.matches("[data-select-all]")) {
      document.querySelectorAll("[data-row-select]").forEach(function (el) { el.checked = box.checked; });
      countSelected();
    } else if (box.matches("[data-row-select]")) {
      countSelected();
    }
  });
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  }, true);
  document.addEventListener("htmx:afterRequest", function (e) {
    var xhr = e.detail && e.detail.xhr;
    if (!xhr) return;
    if (xhr.status === 0) live("Connection lost; retrying…");
    else if (xhr.status >= 500) live("Server error " + xhr.status + "; retrying…");
    else live(paused ? "Live updates paused." : "");
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && window.htmx) {
      document.querySelectorAll("[data-poll]").forEach(function (el) { window.htmx.trigger(el, "lh:refresh"); });
    }
  });
})();
