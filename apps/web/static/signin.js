// A sign-in link carries the token after '#': browsers never send that part,
// so it is read here, dropped from the address bar, and posted with the form.
(function () {
  "use strict";
  var match = /(?:^|&)token=([^&]+)/.exec(window.location.hash.slice(1));
  if (!match) { return; }
  history.replaceState(null, "", window.location.pathname + window.location.search);
  document.getElementById("token").value = decodeURIComponent(match[1]);
  document.getElementById("signin").submit();
})();
