// memvault review UI: small conveniences only. Every page works without this file.
(function () {
  "use strict";
  // Times in the reader's own time zone (the page shows UTC).
  document.querySelectorAll("time[datetime]").forEach(function (el) {
    var when = new Date(el.getAttribute("datetime"));
    if (!isNaN(when.getTime())) { el.title = when.toLocaleString(); }
  });
  // A typed confirmation: the button stays disabled until the word shown is typed.
  document.querySelectorAll("input[data-word]").forEach(function (input) {
    var button = input.form && input.form.querySelector("button[type=submit]");
    if (!button) { return; }
    var check = function () { button.disabled = input.value.trim() !== input.getAttribute("data-word"); };
    input.addEventListener("input", check);
    check();
  });
  // Keys: "/" focuses the first search or revision field; "u" switches the diff view;
  // "j" and "k" move between the files of a diff.
  var files = Array.prototype.slice.call(document.querySelectorAll(".file-diff"));
  var current = -1;
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA")) { return; }
    if (event.key === "/") {
      var field = document.querySelector(".filters input, .revform input");
      if (field) { event.preventDefault(); field.focus(); }
    } else if (event.key === "u") {
      var toggle = document.getElementById("mode-toggle");
      if (toggle) { toggle.click(); }
    } else if ((event.key === "j" || event.key === "k") && files.length) {
      current = Math.max(0, Math.min(files.length - 1, current + (event.key === "j" ? 1 : -1)));
      files[current].scrollIntoView();
      var heading = files[current].querySelector("h3");
      if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
    }
  });
})();
