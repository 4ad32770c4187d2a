// Live refresh for pages that ask for it (<main data-refresh="5">): the
// page is fetched again every few seconds and its <main> replaced, unless
// the pause button is pressed. No build step, no dependency.
(function () {
  var main = document.querySelector("main[data-refresh]");
  if (!main) return;
  var every = Number(main.dataset.refresh) * 1000, paused = false;
  var button = document.getElementById("pause");
  button.addEventListener("click", function () {
    paused = !paused;
    button.textContent = paused ? "resume" : "pause";
    button.setAttribute("aria-pressed", paused);
  });
  setInterval(function () {
    if (paused) return;
    fetch(location.href, {credentials: "same-origin"}).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.text();
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, "text/html").querySelector("main[data-refresh]");
      if (next && !paused) {
        main.querySelectorAll("[data-live]").forEach(function (el) {
          var fresh = next.querySelector("#" + el.id);
          if (fresh) el.replaceWith(fresh);
        });
        document.getElementById("refreshed").textContent = new Date().toLocaleTimeString();
      }
    }).catch(function () {});
  }, every);
})();
