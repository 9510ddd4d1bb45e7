// The segment table: every entry with the runs side by side, sorted,
// filtered and shown a page at a time from the JSON the page carries (a few
// thousand rows of DOM at once would make the page slow). Texts are only
// ever set as text nodes: predictions are hostile input.
(function () {
  "use strict";
  var root = document.getElementById("segments");
  if (!root) { return; }
  var data = JSON.parse(document.getElementById("segment-data").textContent);
  var systems = data.systems, metrics = data.metrics, rows = data.rows;
  var $ = function (id) { return document.getElementById(id); };
  var state = {metric: 0, sort: null, ascending: true, text: "", tier: "", domain: "", differ: false,
               page: 0, size: 50};
  var shown = rows;

  function prediction(row, run) { var out = row.outputs[run]; return out ? out[0] : null; }

  // Built once: the text filter reads them on every keystroke.
  rows.forEach(function (row, index) {
    row.index = index;
    var parts = [row.id, row.source || "", row.reference || ""];
    row.outputs.forEach(function (out) { if (out && out[0] !== null) { parts.push(out[0]); } });
    row.haystack = parts.join("\n").toLowerCase();
    row.differs = row.outputs.some(function (_, run) { return prediction(row, run) !== prediction(row, 0); });
  });

  function value(row, run) {
    var out = row.outputs[run];
    return out ? out[2][state.metric] : null;
  }
  function delta(row, run) {
    var mine = value(row, run), first = value(row, 0);
    return mine === null || first === null ? null : mine - first;
  }
  function format(number) {
    if (number === null || number === undefined) { return "—"; }
    return Number.isInteger(number) ? String(number) : String(Number(number.toPrecision(4)));
  }
  function element(tag, className, text) {
    var made = document.createElement(tag);
    if (className) { made.className = className; }
    if (text !== undefined) { made.textContent = text; }
    return made;
  }
  function option(select, value, label) {
    var made = element("option", null, label);
    made.value = value;
    select.appendChild(made);
  }

  // Sort keys: what each sortable column compares (null: sorts last).
  var keys = {
    id: function (row) { return row.index; },
    tier: function (row) { return row.tier; },
    domain: function (row) { return row.domain; },
  };
  systems.forEach(function (_, run) {
    keys["value" + run] = function (row) { return value(row, run); };
    if (run > 0) { keys["delta" + run] = function (row) { return delta(row, run); }; }
  });

  function compare(key) {
    var read = keys[key], sign = state.ascending ? 1 : -1;
    return function (a, b) {
      var x = read(a), y = read(b);
      if (x === null || y === null) { return (x === null) - (y === null) || a.index - b.index; }
      var order = typeof x === "string" ? x.localeCompare(y, undefined, {numeric: true}) : x - y;
      return sign * order || a.index - b.index;
    };
  }

  function update() {
    var needle = state.text.toLowerCase();
    shown = rows.filter(function (row) {
      return (!needle || row.haystack.indexOf(needle) >= 0)
        && (state.tier === "" || String(row.tier) === state.tier)
        && (state.domain === "" || row.domain === state.domain)
        && (!state.differ || row.differs);
    });
    if (state.sort) { shown.sort(compare(state.sort)); }
    state.page = Math.min(state.page, Math.max(0, Math.ceil(shown.length / state.size) - 1));
    draw();
  }

  // Words of `text` not in the longest common subsequence with `first`'s
  // words are marked; past 250,000 word pairs the row is left unmarked.
  function marked(cell, text, first) {
    var parts = text.split(/(\s+)/), words = parts.filter(function (p, i) { return i % 2 === 0 && p; });
    var base = first.split(/\s+/).filter(Boolean), n = words.length, m = base.length;
    if (n * m > 250000) { cell.textContent = text; return; }
    var table = new Uint16Array((n + 1) * (m + 1));
    for (var i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        table[i * (m + 1) + j] = words[i] === base[j] ? table[(i + 1) * (m + 1) + j + 1] + 1
          : Math.max(table[(i + 1) * (m + 1) + j], table[i * (m + 1) + j + 1]);
      }
    }
    var kept = [], a = 0, b = 0;
    while (a < n && b < m) {
      if (words[a] === base[b]) { kept[a] = true; a++; b++; }
      else if (table[(a + 1) * (m + 1) + b] >= table[a * (m + 1) + b + 1]) { a++; }
      else { b++; }
    }
    var word = 0;
    parts.forEach(function (part, index) {
      if (index % 2 === 1 || !part) { cell.appendChild(document.createTextNode(part)); return; }
      cell.appendChild(kept[word] ? document.createTextNode(part) : element("mark", null, part));
      word++;
    });
  }

  function header() {
    var row = element("tr"), metric = metrics.length ? metrics[state.metric].id : null;
    function column(label, key, className) {
      var cell = element("th", className);
      if (key) {
        var button = element("button", "sort", label);
        button.type = "button";
        button.dataset.sort = key;
        cell.appendChild(button);
        cell.setAttribute("aria-sort", state.sort !== key ? "none" : state.ascending ? "ascending" : "descending");
      } else {
        cell.textContent = label;
      }
      row.appendChild(cell);
    }
    column("id", "id"); column("tier", "tier"); column("domain", "domain");
    column("source", null, "text"); column("reference", null, "text");
    systems.forEach(function (label, run) {
      column(label + ": prediction", null, "text");
      if (metric) {
        column(label + ": " + metric, "value" + run);
        if (run > 0) { column("Δ " + metric + " vs " + systems[0], "delta" + run); }
      }
    });
    $("segment-table").tHead.replaceChildren(row);
  }

  function draw() {
    header();
    var lowerIsBetter = metrics.length && metrics[state.metric].lower_is_better;
    var start = state.page * state.size, page = shown.slice(start, start + state.size);
    var body = document.createDocumentFragment();
    page.forEach(function (row) {
      var tr = element("tr");
      tr.dataset.id = row.id;
      tr.appendChild(element("th", null, row.id));
      tr.appendChild(element("td", "num tier", format(row.tier)));
      tr.appendChild(element("td", "domain", row.domain === null ? "—" : row.domain));
      tr.appendChild(element("td", "text source", row.source === null ? "—" : row.source));
      var reference = element("td", "text reference", row.reference === null ? "—" : row.reference);
      if (row.reference === null && data.reference_note) {
        reference.appendChild(element("div", "why", data.reference_note));
      }
      tr.appendChild(reference);
      systems.forEach(function (_, run) {
        var out = row.outputs[run], cell = element("td", "text prediction");
        cell.dataset.run = run;
        if (!out) {
          cell.appendChild(element("span", "muted", "— not in this run"));
        } else if (out[0] === null) {
          cell.textContent = "—";
        } else if (run > 0 && prediction(row, 0) !== null && out[0] !== prediction(row, 0)) {
          cell.classList.add("differs");
          marked(cell, out[0], prediction(row, 0));
        } else {
          cell.textContent = out[0];
        }
        if (out && out[1]) { cell.appendChild(element("div", "flag", "error: " + out[1])); }
        tr.appendChild(cell);
        if (!metrics.length) { return; }
        var score = element("td", "num value", format(value(row, run)));
        score.dataset.run = run;
        tr.appendChild(score);
        if (run > 0) {
          var difference = delta(row, run), change = element("td", "num delta");
          change.dataset.run = run;
          change.textContent = difference === null ? "—" : (difference > 0 ? "+" : "") + format(difference);
          if (difference) {
            change.classList.add((difference > 0) !== Boolean(lowerIsBetter) ? "better" : "worse");
          }
          tr.appendChild(change);
        }
      });
      body.appendChild(tr);
    });
    $("segment-table").tBodies[0].replaceChildren(body);
    var pages = Math.max(1, Math.ceil(shown.length / state.size));
    $("seg-count").textContent = shown.length === rows.length
      ? rows.length + " segments"
      : shown.length + " of " + rows.length + " segments match";
    $("seg-page").textContent = shown.length
      ? "rows " + (start + 1) + "–" + (start + page.length) + " of " + shown.length + " (page " + (state.page + 1)
        + " of " + pages + ")"
      : "no segment matches";
    $("seg-prev").disabled = state.page === 0;
    $("seg-next").disabled = state.page >= pages - 1;
  }

  // The controls' choices come from the data.
  metrics.forEach(function (metric, index) { option($("seg-metric"), index, metric.id); });
  state.metric = Math.max(0, metrics.findIndex(function (metric) { return metric.id === "composite"; }));
  $("seg-metric").value = String(state.metric);
  $("seg-metric").disabled = !metrics.length;
  var tiers = Array.from(new Set(rows.map(function (row) { return row.tier; }).filter(function (t) { return t !== null; })));
  tiers.sort(function (a, b) { return a - b; }).forEach(function (tier) { option($("seg-tier"), String(tier), "tier " + tier); });
  $("seg-tier").disabled = !tiers.length;
  var domains = Array.from(new Set(rows.map(function (row) { return row.domain; }).filter(function (d) { return d !== null; })));
  domains.sort().forEach(function (domain) { option($("seg-domain"), domain, domain); });
  $("seg-domain").disabled = !domains.length;
  $("seg-differ").disabled = systems.length < 2;

  $("seg-metric").addEventListener("change", function (event) { state.metric = Number(event.target.value); update(); });
  $("seg-text").addEventListener("input", function (event) { state.text = event.target.value; state.page = 0; update(); });
  $("seg-tier").addEventListener("change", function (event) { state.tier = event.target.value; state.page = 0; update(); });
  $("seg-domain").addEventListener("change", function (event) { state.domain = event.target.value; state.page = 0; update(); });
  $("seg-differ").addEventListener("change", function (event) { state.differ = event.target.checked; state.page = 0; update(); });
  $("seg-size").addEventListener("change", function (event) { state.size = Number(event.target.value); state.page = 0; update(); });
  $("seg-prev").addEventListener("click", function () { state.page -= 1; draw(); });
  $("seg-next").addEventListener("click", function () { state.page += 1; draw(); });
  $("segment-table").tHead.addEventListener("click", function (event) {
    var button = event.target.closest("button.sort");
    if (!button) { return; }
    var key = button.dataset.sort;
    state.ascending = state.sort === key ? !state.ascending : true;
    state.sort = key;
    update();
  });
  update();
}());
