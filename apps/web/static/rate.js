// The reviewer's page: scores, verdicts and error spans by keyboard or
// mouse, each item saved when sent, then the next item (or the reference, for
// reference review). Texts are only ever set with textContent: an output that
// holds markup shows as text.
(function () {
  "use strict";
  var task = document.getElementById("task");
  var campaign = task.dataset.campaign;
  var position = Number(task.dataset.position);
  var count = Number(task.dataset.outputs);
  var status = document.getElementById("status");
  var panel = document.getElementById("reference-panel");
  var current = 0;
  var next = null;
  var saving = false;
  var spans = [];

  function output(index) { return document.getElementById("output-" + index); }
  function slider(index) { return document.getElementById("score-" + index); }

  function showScore(index) {
    var input = slider(index);
    document.getElementById("score-shown-" + index).textContent = input.dataset.set === "true" ? input.value : "—";
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

  // Error spans: character offsets into the output's text.
  function drawSpans(index) {
    var text = output(index).querySelector(".text");
    var plain = text.textContent;
    var marks = spans[index].slice().sort(function (a, b) { return a.start - b.start; });
    text.textContent = "";
    var at = 0;
    marks.forEach(function (span) {
      if (span.start < at) { return; }
      text.appendChild(document.createTextNode(plain.slice(at, span.start)));
      var mark = document.createElement("mark");
      mark.className = span.severity;
      mark.textContent = plain.slice(span.start, span.end);
      text.appendChild(mark);
      at = span.end;
    });
    text.appendChild(document.createTextNode(plain.slice(at)));
    var list = document.getElementById("spans-" + index);
    list.textContent = "";
    spans[index].forEach(function (span) {
      var item = document.createElement("li");
      item.textContent = span.severity + ": " + plain.slice(span.start, span.end);
      list.appendChild(item);
    });
  }

  function offsetIn(text, node, offset) {
    var range = document.createRange();
    range.selectNodeContents(text);
    range.setEnd(node, offset);
    return range.toString().length;
  }

  function markSelection(severity) {
    var selection = window.getSelection();
    if (!selection || selection.isCollapsed) { return false; }
    var range = selection.getRangeAt(0);
    for (var i = 0; i < count; i++) {
      var text = output(i).querySelector(".text");
      if (text.contains(range.startContainer) && text.contains(range.endContainer)) {
        var start = offsetIn(text, range.startContainer, range.startOffset);
        var end = offsetIn(text, range.endContainer, range.endOffset);
        if (end > start) {
          spans[i].push({start: start, end: end, severity: severity});
          selection.removeAllRanges();
          drawSpans(i);
          focusOutput(i);
          return true;
        }
      }
    }
    return false;
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

  function save() {
    if (saving) { return; }
    for (var i = 0; i < count; i++) {
      if (slider(i).dataset.set !== "true") {
        status.textContent = "Score translation " + (i + 1) + " first.";
        focusOutput(i);
        return;
      }
    }
    var ratings = [];
    for (var j = 0; j < count; j++) {
      ratings.push({score: Number(slider(j).value), usable: usable(j), spans: spans[j]});
    }
    saving = true;
    status.textContent = "Saving…";
    send("/api/review/campaigns/" + campaign + "/rate/" + position, {ratings: ratings}).then(function (answer) {
      next = answer.next;
      status.textContent = "Saved (" + answer.done + " of " + answer.tasks + ").";
      if (answer.reference !== undefined) {
        document.getElementById("reference").textContent = answer.reference;
        panel.hidden = false;
        document.getElementById("continue").focus();
        saving = false;
      } else {
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

  document.addEventListener("keydown", function (event) {
    var target = event.target;
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
    else if (key === "x") { spans[current].pop(); drawSpans(current); }
    else if (key === "Enter") { save(); }
    else { return; }
    event.preventDefault();
  });

  for (var i = 0; i < count; i++) {
    (function (index) {
      var input = slider(index);
      input.addEventListener("input", function () { input.dataset.set = "true"; showScore(index); });
      input.addEventListener("focus", function () {
        current = index;
        for (var k = 0; k < count; k++) { output(k).classList.toggle("current", k === current); }
      });
      spans.push(JSON.parse(output(index).dataset.spans || "[]"));
      drawSpans(index);
    })(i);
  }
  document.getElementById("save").addEventListener("click", save);
  document.getElementById("continue").addEventListener("click", flagAndContinue);
  if (panel.hidden) { focusOutput(0); }
})();
