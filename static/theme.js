// Leasehold console: the colour theme an operator chose (localStorage "lh-theme": "light" or "dark";
// absent: follow the system). Loaded in <head>, not deferred, so the page never flashes the other theme.
(function () {
  "use strict";
  try {
    var theme = window.localStorage.getItem("lh-theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch (e) { /* storage refused (private mode): follow the system */ }
})();
