/* Autosave the rubric form to the server (a closed tab keeps its draft). Without
   JavaScript the "Save draft" button does the same. */
(function () {
  var form = document.getElementById("review-form"), status = document.getElementById("draft-status");
  if (!form || !form.dataset.draftUrl || !window.fetch) return;
  var timer = null, dirty = false;
  function save() {
    if (!dirty) return; dirty = false;
    fetch(form.dataset.draftUrl, {method: "POST", body: new FormData(form), keepalive: true,
                                  headers: {"X-Draft-Autosave": "1"}, credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(function (j) { status.textContent = "Draft saved " + j.saved_at.slice(11, 19) + " UTC."; })
      .catch(function () { status.textContent = "Draft not saved (server unreachable)."; dirty = true; });
  }
  form.addEventListener("submit", function (e) {
    if (!e.submitter || e.submitter.id !== "save-draft") { dirty = false; clearTimeout(timer); }
  });
  form.addEventListener("input", function () { dirty = true; clearTimeout(timer); timer = setTimeout(save, 600); });
  window.addEventListener("pagehide", save);
  document.addEventListener("visibilitychange", function () { if (document.visibilityState === "hidden") save(); });
})();
