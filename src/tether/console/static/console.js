// Tether console: live updates over Server-Sent Events (no polling), and the theme switch.
// The page works without this script; with it, the parts marked data-part are replaced as the
// run (or the inbox) changes, a banner says when the stream is lost, and choosing a theme
// takes effect at once (the same cookie the server's form sets, so the next page agrees).
(function () {
  "use strict";

  var themes = document.querySelector("form.theme");
  if (themes) {
    themes.addEventListener("submit", function (event) {
      var chosen = event.submitter && event.submitter.value;
      if (!chosen) { return; }
      event.preventDefault();
      var secure = location.protocol === "https:" ? "; secure" : "";
      if (chosen === "system") {
        document.cookie = "tether_theme=; path=/console; max-age=0; samesite=strict" + secure;
        document.documentElement.removeAttribute("data-theme");
      } else {
        document.cookie = "tether_theme=" + chosen + "; path=/console; max-age=31536000; samesite=strict" + secure;
        document.documentElement.setAttribute("data-theme", chosen);
      }
      themes.querySelectorAll("button[name=theme]").forEach(function (button) {
        button.setAttribute("aria-pressed", String(button.value === chosen));
      });
    });
  }

  var live = document.querySelector("[data-live-src]");
  if (!live || !window.EventSource) { return; }
  var banner = document.getElementById("conn");
  var source = new EventSource(live.getAttribute("data-live-src"));
  document.body.setAttribute("data-live", "connecting");
  source.onopen = function () {
    banner.hidden = true;
    banner.textContent = "";
    document.body.setAttribute("data-live", "open");
  };
  source.onerror = function () {
    banner.textContent = "Connection lost: live updates are paused. Reconnecting…";
    banner.hidden = false;
    document.body.setAttribute("data-live", "lost");
  };
  source.addEventListener("update", function (event) {
    var doc = new DOMParser().parseFromString(event.data, "text/html");
    doc.querySelectorAll("[data-part]").forEach(function (part) {
      var current = document.getElementById(part.id);
      if (!current) { return; }
      var keep = part.getAttribute("data-keep");
      // The same waits are open: keep their forms as they are (the person may be typing,
      // and an error shown there must stay).
      if (keep !== null && keep === current.getAttribute("data-keep")) { return; }
      current.replaceWith(document.importNode(part, true));
    });
    // The inbox's own count, in the nav too.
    var count = doc.getElementById("inbox-count");
    var nav = document.getElementById("nav-inbox-count");
    if (count && nav) { nav.textContent = count.getAttribute("data-count"); }
    document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates") || 0) + 1));
  });
})();
