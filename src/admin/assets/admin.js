// Progressive enhancement of the Engram admin panel. Every page works without it.
"use strict";

// Sign-in link from `engram admin-link`: the token travels in the URL fragment, which
// browsers never send to a server. Move it into the form, drop it from the address bar
// and history, and submit.
(function signInFromFragment() {
  var form = document.getElementById("sign-in");
  if (!form || !location.hash) return;
  var match = /^#token=([A-Za-z0-9._-]+)$/.exec(location.hash);
  history.replaceState(null, "", location.pathname);
  if (!match) return;
  form.elements.token.value = match[1];
  form.submit();
})();

// Ask before destructive buttons (data-confirm="…"). Without script, those forms lead
// to a confirmation page or carry a required checkbox instead.
document.addEventListener("submit", function (event) {
  var button = event.submitter;
  var message = (button && button.getAttribute("data-confirm")) || event.target.getAttribute("data-confirm");
  if (message && !window.confirm(message)) event.preventDefault();
});
