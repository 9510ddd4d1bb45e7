// The page's charts. plotly.js comes gzip-compressed and base64-encoded
// (#plotly-gz, a third of its size): the browser inflates it with its own
// DecompressionStream, runs it, then draws every figure from its JSON spec
// (script.figure-spec) with the page's one layout template
// (#plotly-template). <html data-charts> says when that is done ("drawn"),
// or why it failed, so a page (or a test) can wait for the figures.
(function () {
  "use strict";
  var root = document.documentElement;
  var packed = document.getElementById("plotly-gz");

  function bytes(base64) {
    var text = atob(base64.trim());
    var out = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { out[i] = text.charCodeAt(i); }
    return out;
  }

  function inflated(base64) {
    var stream = new Blob([bytes(base64)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text();
  }

  function run(source) {
    // An inline script element: plotly.js runs as if it were written in the page.
    var script = document.createElement("script");
    script.textContent = source;
    document.head.appendChild(script);
  }

  function draw() {
    var template = JSON.parse(document.getElementById("plotly-template").textContent);
    var drawn = Array.from(document.querySelectorAll("script.figure-spec")).map(function (element) {
      var spec = JSON.parse(element.textContent);
      spec.layout.template = template;
      return window.Plotly.newPlot(element.dataset.div, spec.data, spec.layout, spec.config);
    });
    return Promise.all(drawn);
  }

  if (!packed || !document.querySelector("script.figure-spec")) {
    root.dataset.charts = "none";
    return;
  }
  root.dataset.charts = "loading";
  inflated(packed.textContent).then(run).then(draw).then(function () {
    root.dataset.charts = "drawn";
  }).catch(function (error) {
    root.dataset.charts = "failed: " + error;
    console.error("the charts could not be drawn:", error);
  });
})();
