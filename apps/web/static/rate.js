// The reviewer's page: scores, verdicts, error spans ([MISSING] included)
// and decisions on suggested spans, by keyboard or mouse; each item saved
// when sent, then the next item (or the reference, for reference review).
// A gate item that is not accepted shows why and stays. Texts are only ever
// set with textContent: an output that holds markup shows as text.
// Offsets are the server's: characters (code points) of the output as
// stored, "\r\n" included; the DOM's UTF-16 offsets are converted where the
// page reads a selection or cuts the text for its marks.
(function () {
  "use strict";
  var task = document.getElementById("task");
  var campaign = task.dataset.campaign;
  var position = Number(task.dataset.position);
  var count = Number(task.dataset.outputs);
  var protocol = task.dataset.protocol;
  var spansProtocol = protocol === "esa" || protocol === "mqm";
  var warnBelow = Number(task.dataset.warnBelow);
  var missingMarker = task.dataset.missingMarker;
  var status = document.getElementById("status");
  var panel = document.getElementById("reference-panel");
  var feedback = document.getElementById("gate-feedback");
  var category = document.getElementById("category");
  var current = 0;
  var next = null;
  var saving = false;
  var own = [];          // per output: the spans the reviewer marked
  var suggested = [];    // per output: the suggested spans shown
  var decided = [];      // per output, per suggestion: null or {decision, final}
  var focused = [];      // per output: the suggestion in focus (-1: none)
  var characters = [];   // per output: its text as an array of code points

  // Code points start..end of an output's text; an offset past the end is the end.
  function cut(index, start, end) { return characters[index].slice(start, end).join(""); }
  function length(index) { return characters[index].length; }
  // Code points in a piece of DOM text (an astral character is two UTF-16 units, one code point).
  function codePoints(text) { return Array.from(text).length; }

  function output(index) { return document.getElementById("output-" + index); }
  function slider(index) { return document.getElementById("score-" + index); }

  function showScore(index) {
    var input = slider(index);
    document.getElementById("score-shown-" + index).textContent = input.dataset.set === "true" ? input.value : "—";
    showWarning(index);
  }

  function setScore(index, value) {
    var input = slider(index);
    input.value = String(Math.max(0, Math.min(100, value)));
    input.dataset.set = "true";
    showScore(index);
  }

  function focusOutput(index) {
    current = (index + count) % count;
    for (var i = 0; i < count; i++) { output(i).classList.toggle("current", i === current); }
    slider(current).focus();
  }

  // Every error span an output has: the reviewer's own, and the final span
  // of each suggestion accepted or edited.
  function allSpans(index) {
    var found = own[index].slice();
    decided[index].forEach(function (choice) {
      if (choice && choice.decision !== "rejected") { found.push(choice.final); }
    });
    return found;
  }

  function showWarning(index) {
    var input = slider(index);
    var low = spansProtocol && input.dataset.set === "true" && Number(input.value) < warnBelow;
    document.getElementById("warning-" + index).hidden = !(low && allSpans(index).length === 0);
  }

  function mark(kind, text, title) {
    var element = document.createElement("mark");
    element.className = kind;
    element.textContent = text;
    if (title) { element.title = title; }
    return element;
  }

  // The output's text with its marks: errors (minor, major), suggestions not
  // decided yet (dashed), rejected ones (struck through), [MISSING] at the end.
  function draw(index) {
    var text = output(index).querySelector(".text");
    var size = length(index);
    var marks = [];
    own[index].forEach(function (span) { marks.push({span: span, kind: span.severity}); });
    suggested[index].forEach(function (suggestion, k) {
      var choice = decided[index][k];
      var kind = choice === null ? "suggestion" : (choice.decision === "rejected" ? "rejected" : choice.final.severity);
      var span = choice && choice.decision !== "rejected" ? choice.final : suggestion;
      marks.push({span: span, kind: kind + (focused[index] === k ? " focused" : ""), title: suggestion.note,
                  id: "suggested-" + index + "-" + k});
    });
    marks.sort(function (a, b) { return a.span.start - b.span.start || a.span.end - b.span.end; });
    text.textContent = "";
    var at = 0;
    var missing = [];
    marks.forEach(function (item) {
      if (item.span.missing || item.span.start === size) { missing.push(item); return; }
      if (item.span.start < at) { return; }
      text.appendChild(document.createTextNode(cut(index, at, item.span.start)));
      var element = mark(item.kind, cut(index, item.span.start, item.span.end), item.title);
      if (item.id) { element.id = item.id; }
      text.appendChild(element);
      at = item.span.end;
    });
    text.appendChild(document.createTextNode(cut(index, at, size)));
    missing.forEach(function (item) {
      var element = mark(item.kind + " missing", missingMarker, item.title);
      if (item.id) { element.id = item.id; }
      text.appendChild(document.createTextNode(" "));
      text.appendChild(element);
    });
    drawLists(index);
    showWarning(index);
  }

  function spanText(index, span) {
    return span.missing ? missingMarker : cut(index, span.start, span.end);
  }

  function named(span) { return span.severity + (span.category ? " (" + span.category + ")" : ""); }

  function drawLists(index) {
    var list = document.getElementById("spans-" + index);
    list.textContent = "";
    own[index].forEach(function (span) {
      var item = document.createElement("li");
      item.textContent = named(span) + ": " + spanText(index, span);
      list.appendChild(item);
    });
    var shown = document.getElementById("suggestions-" + index);
    shown.textContent = "";
    suggested[index].forEach(function (suggestion, k) {
      var choice = decided[index][k];
      var item = document.createElement("li");
      item.id = "suggestion-" + index + "-" + k;
      item.className = (choice ? choice.decision : "open") + (focused[index] === k ? " focused" : "");
      var span = choice && choice.final ? choice.final : suggestion;
      item.textContent = "suggested " + named(span) + ": " + spanText(index, suggestion) + " — " + suggestion.note +
        " (" + (choice ? choice.decision : "a accept, r reject, t minor/major, e new extent") + ")";
      [["accept", "accepted"], ["reject", "rejected"]].forEach(function (pair) {
        var button = document.createElement("button");
        button.type = "button";
        button.textContent = pair[0];
        button.className = "decide-" + pair[0];
        button.addEventListener("click", function () { focusSuggestion(index, k); decide(index, pair[1]); });
        item.appendChild(document.createTextNode(" "));
        item.appendChild(button);
      });
      shown.appendChild(item);
    });
  }

  function focusSuggestion(index, k) {
    focused[index] = k;
    draw(index);
  }

  function moveSuggestion(step) {
    var total = suggested[current].length;
    if (!total) { status.textContent = "Translation " + (current + 1) + " has no suggested error."; return; }
    var k = focused[current] < 0 ? (step > 0 ? 0 : total - 1) : (focused[current] + step + total) % total;
    focusSuggestion(current, k);
  }

  // A decision on the focused suggestion: accepted keeps its extent and
  // severity; a changed extent or severity makes it edited. In MQM its span
  // takes the category list's current choice, as a marked span does:
  // deciding again after choosing another category changes it.
  function decide(index, decision, change) {
    var k = focused[index];
    if (k < 0) { status.textContent = "Press s to choose a suggested error first."; return; }
    var suggestion = suggested[index][k];
    var choice = decided[index][k];
    if (decision === "rejected") {
      decided[index][k] = {decision: "rejected", final: null};
    } else {
      var base = choice && choice.final ? choice.final : suggestion;
      var final = {start: base.start, end: base.end, severity: base.severity};
      if (suggestion.missing) { final.missing = true; }
      if (protocol === "mqm") { final.category = category.value; }
      if (change) { change(final); }
      var same = final.start === suggestion.start && final.end === suggestion.end &&
        final.severity === suggestion.severity;
      decided[index][k] = {decision: same ? "accepted" : "edited", final: final};
    }
    draw(index);
  }

  function offsetIn(text, node, offset) {
    var range = document.createRange();
    range.selectNodeContents(text);
    range.setEnd(node, offset);
    return codePoints(range.toString());
  }

  // The selected characters of one output: {index, start, end}, or null.
  function selected() {
    var selection = window.getSelection();
    if (!selection || selection.isCollapsed) { return null; }
    var range = selection.getRangeAt(0);
    for (var i = 0; i < count; i++) {
      var text = output(i).querySelector(".text");
      if (text.contains(range.startContainer) && text.contains(range.endContainer)) {
        var start = offsetIn(text, range.startContainer, range.startOffset);
        var end = Math.min(offsetIn(text, range.endContainer, range.endOffset), length(i));
        if (end > start) { return {index: i, start: start, end: end}; }
      }
    }
    return null;
  }

  function addSpan(index, span) {
    if (protocol === "mqm") { span.category = category.value; }
    own[index].push(span);
    draw(index);
    focusOutput(index);
  }

  function markSelection(severity) {
    var found = selected();
    if (!found) { return false; }
    window.getSelection().removeAllRanges();
    var span = {start: found.start, end: found.end, severity: severity};
    if (spansProtocol) { span.missing = false; }
    addSpan(found.index, span);
    return true;
  }

  function markMissing(severity) {
    var end = length(current);
    addSpan(current, {start: end, end: end, severity: severity, missing: true});
  }

  function newExtent() {
    var found = selected();
    if (!found || focused[found.index] < 0 || suggested[found.index][focused[found.index]].missing) {
      status.textContent = "Select the words of the focused suggestion's new extent, then press e.";
      return;
    }
    window.getSelection().removeAllRanges();
    decide(found.index, "edited", function (final) { final.start = found.start; final.end = found.end; });
  }

  function usable(index) {
    var checked = document.querySelector("input[name='usable-" + index + "']:checked");
    return checked ? checked.value === "yes" : null;
  }

  function setUsable(index, yes) {
    document.querySelector("input[name='usable-" + index + "'][value='" + (yes ? "yes" : "no") + "']").checked = true;
  }

  function send(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"content-type": "application/json", "accept": "application/json", "x-csrf-token": task.dataset.csrf},
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) { throw new Error(data.error || ("HTTP " + response.status)); }
        return data;
      });
    });
  }

  function goOn() {
    window.location.assign("/review/campaigns/" + campaign + "/rate" + (next === null ? "" : "/" + next));
  }

  function decisions(index) {
    return suggested[index].map(function (suggestion, k) {
      var choice = decided[index][k];
      return {detector: suggestion.detector, start: suggestion.start, end: suggestion.end,
              decision: choice.decision, final: choice.final};
    });
  }

  function gateRefused(answer) {
    feedback.textContent = "";
    var intro = document.createElement("p");
    intro.textContent = "Not accepted yet: change your answer and send it again.";
    feedback.appendChild(intro);
    var list = document.createElement("ul");
    answer.reasons.forEach(function (reason) {
      var item = document.createElement("li");
      item.textContent = reason;
      list.appendChild(item);
    });
    feedback.appendChild(list);
    feedback.hidden = false;
    status.textContent = "Not accepted: see above.";
  }

  function save() {
    if (saving) { return; }
    for (var i = 0; i < count; i++) {
      if (slider(i).dataset.set !== "true") {
        status.textContent = "Score translation " + (i + 1) + " first.";
        focusOutput(i);
        return;
      }
      var open = decided[i].indexOf(null);
      if (open >= 0) {
        status.textContent = "Accept or reject suggested error " + (open + 1) + " of translation " + (i + 1) + " first.";
        focusOutput(i);
        focusSuggestion(i, open);
        return;
      }
    }
    var ratings = [];
    for (var j = 0; j < count; j++) {
      ratings.push({score: Number(slider(j).value), usable: usable(j), spans: allSpans(j), decisions: decisions(j)});
    }
    saving = true;
    status.textContent = "Saving…";
    send("/api/review/campaigns/" + campaign + "/rate/" + position,
         {ratings: ratings, opened_at: task.dataset.openedAt}).then(function (answer) {
      saving = false;
      if (answer.passed === false) { gateRefused(answer); return; }
      next = answer.next;
      status.textContent = "Saved (" + answer.done + " of " + answer.tasks + ").";
      if (answer.reference !== undefined) {
        document.getElementById("reference").textContent = answer.reference;
        panel.hidden = false;
        document.getElementById("continue").focus();
      } else {
        saving = true;
        goOn();
      }
    }).catch(function (error) {
      saving = false;
      status.textContent = "Not saved: " + error.message;
    });
  }

  function flagAndContinue() {
    var flag = document.getElementById("flag").value;
    var note = document.getElementById("flag-note").value;
    send("/api/review/campaigns/" + campaign + "/flag", {position: position, flag: flag, note: note})
      .then(goOn)
      .catch(function (error) { status.textContent = "Flag not saved: " + error.message; });
  }

  function toggleSeverity() {
    decide(current, "edited", function (final) { final.severity = final.severity === "minor" ? "major" : "minor"; });
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (category && target === category) {
      if (event.key === "Escape" || event.key === "Enter") { event.preventDefault(); focusOutput(current); }
      return;
    }
    var typing = target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
      (target.tagName === "INPUT" && target.type === "text");
    if (!panel.hidden) {
      if (event.key === "Enter") { event.preventDefault(); flagAndContinue(); }
      else if (event.key === "f" && !typing) { event.preventDefault(); document.getElementById("flag").focus(); }
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var key = event.key;
    if (key >= "0" && key <= "9") { setScore(current, Number(key) * 10); }
    else if (key === "=") { setScore(current, 100); }
    else if (key === "+") { setScore(current, Number(slider(current).value) + 1); }
    else if (key === "-") { setScore(current, Number(slider(current).value) - 1); }
    else if (key === "y" || key === "n") { setUsable(current, key === "y"); }
    else if (key === "]" || (key === "Tab" && !event.shiftKey)) { focusOutput(current + 1); }
    else if (key === "[" || (key === "Tab" && event.shiftKey)) { focusOutput(current - 1); }
    else if (key === "m" || key === "M") { if (!markSelection(key === "m" ? "minor" : "major")) { return; } }
    else if (spansProtocol && (key === "o" || key === "O")) { markMissing(key === "o" ? "minor" : "major"); }
    else if (key === "x") { own[current].pop(); draw(current); }
    else if (key === "s" || key === "S") { moveSuggestion(key === "s" ? 1 : -1); }
    else if (key === "a") { decide(current, "accepted"); }
    else if (key === "r") { decide(current, "rejected"); }
    else if (key === "t") { toggleSeverity(); }
    else if (key === "e") { newExtent(); }
    else if (key === "c" && category) { category.focus(); }
    else if (key === "h") { var keys = document.getElementById("keys"); keys.open = !keys.open; }
    else if (key === "Enter") { save(); }
    else { return; }
    event.preventDefault();
  });

  // A rated item comes back with its spans (suggestions' finals among them)
  // and decisions: each final is the stored span it names (with its
  // [MISSING] and category, which older decisions did not keep); the
  // reviewer's own spans are the rest.
  function restore(index, spans, stored) {
    function key(span) { return span.start + ":" + span.end + ":" + span.severity; }
    var rest = spans.slice();
    decided.push(suggested[index].map(function (suggestion, k) {
      var choice = stored[k];
      if (!choice) { return null; }
      var final = choice.final;
      var at = final ? rest.map(key).indexOf(key(final)) : -1;
      if (at >= 0) { final = rest.splice(at, 1)[0]; }
      return {decision: choice.decision, final: final};
    }));
    own.push(rest);
  }

  for (var i = 0; i < count; i++) {
    (function (index) {
      var input = slider(index);
      var element = output(index);
      // The text as stored (JSON keeps "\r\n", which HTML parsing makes "\n").
      element.dataset.plain = JSON.parse(element.dataset.text);
      characters.push(Array.from(element.dataset.plain));
      input.addEventListener("input", function () { input.dataset.set = "true"; showScore(index); });
      input.addEventListener("focus", function () {
        current = index;
        for (var k = 0; k < count; k++) { output(k).classList.toggle("current", k === current); }
      });
      suggested.push(JSON.parse(element.dataset.suggestions || "[]"));
      focused.push(-1);
      restore(index, JSON.parse(element.dataset.spans || "[]"), JSON.parse(element.dataset.decisions || "[]"));
      draw(index);
    })(i);
  }
  document.getElementById("save").addEventListener("click", save);
  document.getElementById("continue").addEventListener("click", flagAndContinue);
  if (panel.hidden) { focusOutput(0); }
})();
