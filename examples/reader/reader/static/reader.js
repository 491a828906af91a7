// The reader's little bit of JavaScript: the live cost meter, Queue taps without a reload,
// and the text of an article that was not cached when its page was served.
(function () {
  "use strict";

  var METER = ["paid", "cached", "lost", "running", "queued", "views_lost"];
  var IDS = {views_lost: "meter-views"};

  function showMeter(m) {
    METER.forEach(function (name) {
      var el = document.getElementById(IDS[name] || "meter-" + name);
      if (el) el.textContent = String(m[name]);
    });
    document.querySelectorAll(".card").forEach(function (card) {
      var state = m.articles[card.dataset.article] || "";
      var job = m.tapped[card.dataset.article];
      var button = card.querySelector("button.queue");
      if (button && job && !button.classList.contains("queued")) {
        button.classList.add("queued");
        button.disabled = true;
        button.textContent = "Queued";
        button.dataset.job = String(job);
      } else if (button && !job && button.classList.contains("queued") && state === "cached") {
        button.classList.remove("queued");  // done: it can be queued again
        button.disabled = false;
        button.textContent = "Queue";
      }
      var status = card.querySelector("[data-status]");
      if (!status) return;
      status.className = "status " + state;
      status.textContent = state === "cached" ? "ready" : state === "computing" ? "being cleaned…" : "";
    });
  }

  function pollMeter() {
    fetch("/api/meter", {cache: "no-store"})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (m) { if (m) showMeter(m); })
      .catch(function () {})
      .then(function () { setTimeout(pollMeter, 1000); });
  }

  function tap(form) {
    var button = form.querySelector("button");
    button.disabled = true;
    button.textContent = "Queueing…";
    fetch(form.action, {method: "POST", headers: {Accept: "application/json"}})
      .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
      .then(function (j) {
        button.textContent = "Queued";
        button.classList.add("queued");
        button.dataset.job = String(j.job);
      })
      .catch(function () { button.disabled = false; button.textContent = "Queue"; });
  }

  function paragraphs(container, items, headings) {
    container.textContent = "";
    items.forEach(function (text, i) {
      var p = document.createElement(headings.indexOf(i) >= 0 ? "h2" : "p");
      p.textContent = text;
      container.appendChild(p);
    });
  }

  function loadArticle(article) {
    var how = document.getElementById("how");
    // A POST: the direct lane may pay, and the app takes that only from its own pages.
    fetch("/api/article/" + article.dataset.article, {method: "POST", cache: "no-store"})
      .then(function (r) { return r.json().then(function (j) { return [r.ok, j]; }); })
      .then(function (res) {
        var ok = res[0], value = res[1];
        if (!ok) { how.textContent = "Could not clean this article: " + value.error; return; }
        paragraphs(document.getElementById("text"), value.paragraphs, value.headings || []);
        if (value.summary) {
          document.getElementById("summary-text").textContent = value.summary;
          document.getElementById("summary").hidden = false;
        }
        how.textContent = value.how === "paid"
          ? "Cleaned just now for you (paid once, in " + value.seconds + " s)."
          : value.how === "waited"
            ? "Cleaned by the " + value.lane + " lane while you waited (paid once, by it)."
            : "From the cache: cleaned once, by the " + value.lane + " lane.";
        article.dataset.turn = value.turn;
        article.dataset.how = value.how;
        article.dataset.pending = "no";
      })
      .catch(function () {});
  }

  document.querySelectorAll("form.tap-form").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      tap(form);
    });
  });
  var article = document.getElementById("article");
  if (article && article.dataset.pending === "yes") loadArticle(article);
  setTimeout(pollMeter, 1000);
})();
