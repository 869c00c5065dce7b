// Tether console: live updates over Server-Sent Events (no polling). The page works without
// this script; with it, the parts marked data-part are replaced as the run (or the inbox)
// changes, and a banner says when the stream is lost.
(function () {
  "use strict";
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
    document.body.setAttribute("data-updates", String(Number(document.body.getAttribute("data-updates") || 0) + 1));
  });
})();
