// The dashboard's page: draws the snapshot that /api/state serves, polls it every interval,
// and (only when the server allows actions) sends retry, bury, purge and release, asking
// first before a bury, a purge or a release. Every text from the directory goes in through
// textContent, never as HTML. Which page of each list it shows is in its own address
// (?queues_after=50, ...), which it passes on to every poll; the pagers are links to the
// neighbouring pages.
(function () {
  "use strict";

  const root = document.getElementById("dashboard");
  const token = document.querySelector('meta[name="dashboard-token"]').content;
  const interval = Math.max(200, Number(root.dataset.interval) * 1000 || 1000);
  const STATES = [
    ["ready", "Queued", "ready to run now"],
    ["leased", "Leased", "taken by a worker"],
    ["scheduled", "Delayed", "waiting for their delay or retry"],
    ["dead", "Dead letters", "out of attempts, or buried"],
  ];
  let state = JSON.parse(document.getElementById("initial-state").textContent);
  let lastOk = Date.now();
  const query = window.location.search;

  // ---- building DOM ------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = String(value);
      else node.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "";
    const sign = seconds < 0 ? "-" : "";
    const s = Math.abs(seconds);
    if (s < 10) return sign + s.toFixed(1) + " s";
    const w = Math.round(s);
    if (w < 60) return sign + w + " s";
    if (w < 3600) return sign + Math.floor(w / 60) + " min " + (w % 60) + " s";
    if (w < 86400) return sign + Math.floor(w / 3600) + " h " + Math.floor((w % 3600) / 60) + " min";
    return sign + Math.floor(w / 86400) + " d " + Math.floor((w % 86400) / 3600) + " h";
  }

  // What only a directory has (a volume on disk, a size limit) is null on Redis: shown as "–"
  // with a title saying why.
  function absent(value, format) {
    return value === null || value === undefined ? "–" : format(value);
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = n;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return unit === 0 ? n + " B" : value.toFixed(1) + " " + units[unit];
  }

  // A cell whose text is for a person and whose data-seconds is for a program (the tests).
  function ageCell(cls, seconds) {
    return el("td", { class: cls + " num", "data-seconds": seconds === null ? null : seconds.toFixed(3), text: age(seconds) });
  }

  function table(columns, rows, attrs) {
    const head = el("tr", {}, ...columns.map(([label, cls]) => el("th", { class: cls }, label)));
    return el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...rows));
  }

  function button(action, label, data) {
    return el("button", { type: "button", class: "action " + action, "data-action": action, ...data }, label);
  }

  // ---- the sections -------------------------------------------------------------------------

  function drawStats(s) {
    const stats = s.stats;
    const hitRate = stats.hits + stats.misses > 0 ? ((100 * stats.hits) / (stats.hits + stats.misses)).toFixed(1) + " %" : "–";
    const cards = [
      ["count", "entries", stats.count, String(stats.count)],
      ["volume", "volume", stats.volume, absent(stats.volume, bytes)],
      ["hits", "hits", stats.hits, String(stats.hits)],
      ["misses", "misses", stats.misses, String(stats.misses)],
      ["hit-rate", "hit rate", hitRate, hitRate],
      ["queues", "queues", stats.queues, String(stats.queues)],
      ["job-queues", "job queues", stats.job_queues, absent(stats.job_queues, String)],
      ["claims", "live claims", stats.claims, String(stats.claims)],
      ["eviction", "eviction", stats.eviction_policy, stats.eviction_policy],
      ["size-limit", "size limit", stats.size_limit, absent(stats.size_limit, bytes)],
    ];
    const section = document.getElementById("stats");
    const onlyDirectory = "a directory's figure: it does not apply on Redis (the server's maxmemory and maxmemory-policy govern its memory)";
    section.replaceChildren(
      ...cards.map(([key, label, raw, shown]) =>
        el("div", { class: "card", "data-stat": key, "data-value": raw === null ? "" : raw, title: raw === null ? onlyDirectory : null },
          el("div", { class: "value" }, shown), el("div", { class: "label" }, label)))
    );
    if (!stats.statistics) {
      section.append(el("p", { class: "hint" }, "hits and misses are counted only while statistics are on (cache.stats(enable=True))"));
    }
  }

  // "51–100 of 1000 queues", with links to the first and the next page of this list. The
  // links keep the other lists' pages: each list's page is a parameter of the address.
  function pager(name, info, noun) {
    if (!info || (info.start === 0 && info.next === null)) return null;
    const link = (cls, label, after) => {
      const params = new URLSearchParams(window.location.search);
      if (after === null) params.delete(name + "_after");
      else params.set(name + "_after", after);
      const search = params.toString();
      return el("a", { class: cls, href: search ? "?" + search : window.location.pathname }, label);
    };
    const first = info.shown ? info.start + 1 : info.start;
    return el("p", { class: "pager" },
      first + "–" + (info.start + info.shown) + " of " + info.total + " " + noun,
      info.start > 0 ? link("first", "« first", null) : null,
      info.next !== null ? link("next", "next " + info.limit + " »", info.next) : null);
  }

  function drawQueues(s) {
    const body = document.querySelector("#queues .body");
    const more = pager("queues", s.pages.queues, "queues");
    if (!s.queues.length) {
      body.replaceChildren(el("p", { class: "empty" }, "No queues: nothing pushed, or everything pulled."), more || "");
      return;
    }
    const rows = s.queues.map((q) =>
      el("tr", { "data-queue": q.prefix === null ? "-" : q.prefix },
        el("td", { class: "prefix" }, q.prefix === null ? "(int keys)" : q.prefix),
        el("td", { class: "depth num", text: q.depth }),
        s.backend === "redis"
          ? el("td", { class: "oldest num", title: "Redis keeps no time of storing an item" }, "–")
          : ageCell("oldest", q.oldest_age),
        el("td", { class: "front", text: q.front === null ? "" : q.front })));
    body.replaceChildren(
      table([["prefix", ""], ["depth", "num"], ["oldest item", "num"], ["front item", ""]], rows),
      more || "");
  }

  function jobColumns(stateName) {
    const cols = [["id", "num"], ["attempts", "num"], ["age", "num"]];
    if (stateName === "leased") cols.push(["lease age", "num"], ["lease left", "num"]);
    if (stateName === "scheduled") cols.push(["due in", "num"]);
    if (stateName === "dead") cols.push(["last error", ""]);
    cols.push(["value", ""]);
    if (state.actions) cols.push(["", ""]);
    return cols;
  }

  function jobRow(job) {
    const cells = [
      el("td", { class: "id num", text: job.id }),
      el("td", { class: "attempts num", "data-attempts": job.attempts, text: job.attempts + " / " + (job.max_attempts || "∞") }),
      ageCell("age", job.age),
    ];
    if (job.state === "leased") cells.push(ageCell("lease-age", job.lease_age), ageCell("lease-left", job.due_in));
    if (job.state === "scheduled") cells.push(ageCell("due-in", job.due_in));
    if (job.state === "dead") cells.push(el("td", { class: "error", text: job.error || "" }));
    cells.push(el("td", { class: "value", text: job.value }));
    if (state.actions) {
      const data = { "data-job-id": job.id, "data-queue": job.queue };
      cells.push(el("td", { class: "buttons" },
        job.state === "dead" ? button("retry", "retry", data) : button("bury", "bury", data)));
    }
    return el("tr", { "data-job-id": job.id, "data-state": job.state }, ...cells);
  }

  function drawJobs(s) {
    const body = document.querySelector("#jobs .body");
    const more = pager("job_queues", s.pages.job_queues, "job queues");
    if (!s.job_queues.length) {
      body.replaceChildren(el("p", { class: "empty" }, "No job queues."), more || "");
      return;
    }
    body.replaceChildren(...s.job_queues.map((q) => {
      const counts = el("div", { class: "counts" },
        ...STATES.map(([name, label]) =>
          el("span", { class: "count " + name, "data-count": name, "data-value": q.counts[name] },
            el("b", {}, String(q.counts[name])), " " + label.toLowerCase())));
      const head = el("div", { class: "queue-head" }, el("h3", {}, q.name), counts);
      if (state.actions && q.counts.dead > 0) {
        head.append(button("purge", "purge " + q.counts.dead + " dead", { "data-queue": q.name }));
      }
      // A table for each state that has jobs; the empty states on one line after them.
      const tables = STATES.filter(([name]) => q.jobs[name].length).map(([name, label, hint]) => {
        const jobs = q.jobs[name];
        const shown = jobs.length < q.counts[name] ? " (first " + jobs.length + " of " + q.counts[name] + ")" : "";
        const title = el("h4", {}, label + " ", el("small", {}, hint + shown));
        const content = table(jobColumns(name), jobs.map(jobRow), { "data-job-queue": q.name, "data-state": name });
        return el("div", { class: "state " + name }, title, content);
      });
      const empty = STATES.filter(([name]) => !q.jobs[name].length);
      if (empty.length) {
        tables.push(el("p", { class: "empty states" }, "No jobs ",
          ...empty.map(([name, label], i) => el("span", { "data-job-queue": q.name, "data-state": name },
            (i ? (i === empty.length - 1 ? " or " : ", ") : "") + label.toLowerCase()))));
      }
      return el("article", { class: "job-queue", "data-job-queue": q.name }, head, ...tables);
    }), more || "");
  }

  function drawClaims(s) {
    const body = document.querySelector("#claims .body");
    const more = pager("claims", s.pages.claims, "claims");
    if (!s.claims.length) {
      body.replaceChildren(el("p", { class: "empty" }, "No live claims."), more || "");
      return;
    }
    // A release names the claim (namespace and key as shown); the server breaks whatever
    // claim is live on that key, so the page never needs, nor gets, a claim's token.
    const rows = s.claims.map((c) => {
      const cells = [
        el("td", { class: "namespace", text: c.namespace }),
        el("td", { class: "key", text: c.key }),
        el("td", { class: "holder", text: c.host + ":" + c.pid }),
        ageCell("held-for", c.held_for),
        ageCell("lease-left", c.lease_left)];
      if (state.actions) {
        cells.push(el("td", { class: "buttons" },
          button("release", "release", { "data-namespace": c.namespace, "data-key": c.key })));
      }
      return el("tr", { "data-claim-key": c.key, "data-namespace": c.namespace }, ...cells);
    });
    const cols = [["namespace", ""], ["key", ""], ["holder (host:pid)", ""], ["held for", "num"], ["lease left", "num"]];
    if (state.actions) cols.push(["", ""]);
    body.replaceChildren(table(cols, rows), more || "");
  }

  // The tasks by name (api/tasks): totals, rates per minute over the dashboard's recent
  // reads, mean run time, and the latest failure. Read-only.
  function perMinute(value) {
    return value === null || value === undefined ? "–" : value.toFixed(1);
  }

  function runTime(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    return seconds < 1 ? (seconds * 1000).toFixed(1) + " ms" : age(seconds);
  }

  function drawTasks(t) {
    const body = document.querySelector("#tasks .body");
    if (!t || t.error || !t.tasks.length) {
      body.replaceChildren(el("p", { class: "empty" }, t && t.error ? t.error : "No task has run here yet."));
      return;
    }
    const rows = t.tasks.map((task) => {
      const f = task.last_failure;
      const failure = f
        ? el("span", { class: f.final ? "failure dead" : "failure", title: "job " + f.id + ", attempt " + f.attempt },
          f.error + " (" + age(f.ago) + " ago" + (f.final ? ", dead" : ", retried") + ")")
        : "";
      return el("tr", { "data-task": task.name },
        el("td", { class: "name", text: task.name }),
        el("td", { class: "num started", text: task.started }),
        el("td", { class: "num succeeded", text: task.succeeded }),
        el("td", { class: "num failed", text: task.failed }),
        el("td", { class: "num retried", text: task.retried }),
        el("td", { class: "num rate", text: perMinute(task.per_minute.succeeded) + " / " + perMinute(task.per_minute.failed) }),
        el("td", { class: "num run-mean", text: runTime(task.run_mean) }),
        el("td", { class: "last-failure" }, failure));
    });
    body.replaceChildren(table([["task", ""], ["started", "num"], ["succeeded", "num"], ["failed", "num"],
      ["retried", "num"], ["ok / failed per min", "num"], ["mean run", "num"], ["latest failure", ""]], rows));
  }

  async function fetchTasks() {
    try {
      const response = await fetch("api/tasks", { cache: "no-store" });
      drawTasks(await response.json());
    } catch (error) {
      // The state's poll says when the store cannot be read.
    }
  }

  function drawSettings(s) {
    const rows = Object.keys(s.settings).sort().map((name) =>
      el("tr", { "data-setting": name }, el("td", { text: name }), el("td", { class: "num", text: s.settings[name] })));
    document.querySelector("#settings .body").replaceChildren(table([["setting", ""], ["value", "num"]], rows));
  }

  // The directory could not be read (deleted, moved, damaged), or the Redis server did not
  // answer: the server said why.
  function problem(text) {
    const box = document.getElementById("problem");
    box.textContent = text || "";
    box.hidden = !text;
  }

  function draw(s) {
    if (s.error) {
      problem(s.error);
      return false;
    }
    problem(null);
    state = s;
    drawStats(s);
    drawQueues(s);
    drawJobs(s);
    drawClaims(s);
    drawSettings(s);
    root.dataset.drawn = String(s.time);
    return true;
  }

  // The state for this page's lists; what went wrong if it could not be had.
  async function fetchState() {
    const response = await fetch("api/state" + query, { cache: "no-store" });
    let answer = null;
    try {
      answer = await response.json();
    } catch (error) {
      answer = null;
    }
    if (!response.ok && !(answer && answer.error)) throw new Error("HTTP " + response.status);
    return answer;
  }

  // ---- live updates -------------------------------------------------------------------------

  function showLive(ok) {
    const live = document.getElementById("live");
    live.textContent = ok ? "live" : "offline";
    live.className = "badge " + (ok ? "live" : "offline");
    const seconds = (Date.now() - lastOk) / 1000;
    document.getElementById("updated").textContent = ok ? "" : "last update " + age(seconds) + " ago";
  }

  async function poll() {
    try {
      const ok = draw(await fetchState());
      if (ok) lastOk = Date.now();
      // The badge with the state just drawn, in the same turn: set after the tasks' fetch,
      // the page showed a problem under a "live" badge while that fetch was awaited.
      showLive(ok);
      await fetchTasks();
    } catch (error) {
      showLive(false);
    } finally {
      window.setTimeout(poll, interval);
    }
  }

  function notice(text, isError) {
    const box = document.getElementById("notice");
    box.textContent = text;
    box.className = isError ? "notice error" : "notice";
    box.hidden = false;
  }

  async function act(action, data) {
    let url;
    let body = null;
    if (action === "purge") {
      if (!window.confirm("Delete the dead jobs of '" + data.queue + "'? This cannot be undone.")) return;
      url = "api/purge";
      body = JSON.stringify({ queue: data.queue });
    } else if (action === "release") {
      const question = "Release the claim on " + data.key + " (" + data.namespace + ")? Its " +
        "holder's next renewal fails, and another process may take it.";
      if (!window.confirm(question)) return;
      url = "api/claims/release";
      body = JSON.stringify({ namespace: data.namespace, key: data.key });
    } else if (action === "bury") {
      const question = "Bury job " + data.jobId + " of '" + data.queue + "'? It goes to the dead " +
        "letters (a worker holding it loses its lease) and runs again only if retried.";
      if (!window.confirm(question)) return;
      url = "api/jobs/" + encodeURIComponent(data.jobId) + "/bury";
    } else {
      url = "api/jobs/" + encodeURIComponent(data.jobId) + "/" + action;
    }
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "X-Dashboard-Token": token, "Content-Type": "application/json" },
        body: body,
      });
      const answer = await response.json();
      notice(answer.message || answer.error || "HTTP " + response.status, !response.ok);
    } catch (error) {
      notice(String(error), true);
    }
    try {
      showLive(draw(await fetchState()));
    } catch (error) {
      showLive(false);
    }
  }

  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
    if (target && state.actions) act(target.dataset.action, target.dataset);
  });

  showLive(draw(state));
  fetchTasks();
  window.setTimeout(poll, interval);
})();
