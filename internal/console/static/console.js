// Live refresh for pages that ask for it (<main data-refresh="5">): the
// page is fetched again every few seconds and its live parts replaced,
// unless the pause button is pressed. A refresh that fails says so (since
// when, why) and marks the numbers it could not renew as stale. Times are
// UTC, as on every page. No build step, no dependency.
(function () {
  var main = document.querySelector("main[data-refresh]");
  if (!main) return;
  var every = Number(main.dataset.refresh) * 1000, paused = false, failingSince = null;
  var button = document.getElementById("pause");
  var stale = document.getElementById("stale");
  button.addEventListener("click", function () {
    paused = !paused;
    button.textContent = paused ? "resume" : "pause";
    button.setAttribute("aria-pressed", paused);
  });
  function utc(d) { return d.toISOString().slice(11, 19) + " UTC"; }
  function failed(why) {
    if (!failingSince) failingSince = new Date();
    main.querySelectorAll("[data-live]").forEach(function (el) { el.classList.add("stale"); });
    stale.textContent = "Refresh failing since " + utc(failingSince) + " (last try " + utc(new Date()) + "): " + why +
      ". The numbers below are from " + document.getElementById("refreshed").textContent + " and may be out of date.";
    stale.hidden = false;
  }
  setInterval(function () {
    if (paused) return;
    fetch(location.href, {credentials: "same-origin"}).then(function (r) {
      return r.text().then(function (text) {
        if (!r.ok) throw new Error(r.status + " " + r.statusText + (text ? ": " + text.trim().slice(0, 300) : ""));
        return text;
      });
    }).then(function (html) {
      var next = new DOMParser().parseFromString(html, "text/html").querySelector("main[data-refresh]");
      if (!next) throw new Error("the answer is not the page");
      if (paused) return;
      main.querySelectorAll("[data-live]").forEach(function (el) {
        var fresh = next.querySelector("#" + el.id);
        if (fresh) el.replaceWith(fresh);
      });
      var shown = next.querySelector("#refreshed");
      document.getElementById("refreshed").textContent = shown ? shown.textContent : utc(new Date());
      failingSince = null;
      stale.hidden = true;
    }).catch(function (e) { failed(e.message || String(e)); });
  }, every);
})();
