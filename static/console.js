// console.js: the console's only script besides htmx. The Content-Security-Policy
// forbids inline scripts (and htmx's hx-on, which needs eval), so the few
// behaviours htmx has no attribute for live here, bound by event delegation:
//
//   - live regions ([data-live], polled by htmx) that fail to refresh are
//     marked stale and a banner says "Connection lost — retrying" with the
//     time of the last good update; it clears at the next good refresh;
//   - an action that does not reach the master (or gets an answer that is not
//     a page fragment, like a plain 500) says so in the toast region (#flash)
//     instead of failing silently or swapping an error text into the table;
//   - copy buttons ([data-copy] naming the id of the element to copy);
//   - toast close buttons ([data-dismiss]).
(function () {
  "use strict";

  var lastGood = new Date();
  var lost = false;

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function clock(d) { return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()); }

  function isLive(elt) { return !!(elt && elt.hasAttribute && elt.hasAttribute("data-live")); }

  function banner() { return document.getElementById("conn-status"); }

  function markLost(why) {
    lost = true;
    var b = banner();
    if (b) {
      b.textContent = "Connection lost — retrying. Last good update " + clock(lastGood) + (why ? " (" + why + ")." : ".");
      b.hidden = false;
    }
    document.querySelectorAll("[data-live]").forEach(function (e) { e.classList.add("stale"); });
  }

  function markGood() {
    lastGood = new Date();
    if (!lost) { return; }
    lost = false;
    var b = banner();
    if (b) {
      b.hidden = true;
      b.textContent = "";
    }
    document.querySelectorAll("[data-live].stale").forEach(function (e) { e.classList.remove("stale"); });
  }

  // toast puts one message into the toast region: the page's #flash, or one
  // made for the purpose. It never moves the page: the region is fixed.
  function toast(ok, msg) {
    var box = document.getElementById("flash");
    if (!box) {
      box = document.createElement("div");
      box.id = "flash";
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      document.body.appendChild(box);
    }
    var p = document.createElement("p");
    p.className = "flash " + (ok ? "flash-ok" : "flash-error");
    p.appendChild(document.createTextNode(msg));
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("data-dismiss", "");
    close.setAttribute("aria-label", "Dismiss");
    p.appendChild(close);
    box.replaceChildren(p);
  }

  // actionName is how a message names what was pressed: "Disable bw1".
  function actionName(elt) {
    var btn = elt && elt.querySelector ? elt.querySelector("button[type=submit], button:not([type])") : null;
    var label = (btn || elt).textContent.trim();
    var who = btn ? (btn.getAttribute("data-node") || btn.getAttribute("data-user") || "") : "";
    if (who) { label += " " + who; }
    return label ? "“" + label + "”" : "The action";
  }

  document.addEventListener("htmx:beforeSend", function (evt) {
    // A hung master must end in an error, not a poll pending forever.
    if (isLive(evt.detail.elt)) { evt.detail.xhr.timeout = 10000; }
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var d = evt.detail, st = d.xhr ? d.xhr.status : 0;
    var type = d.xhr ? (d.xhr.getResponseHeader("Content-Type") || "") : "";
    if (isLive(d.elt)) {
      if (st >= 200 && st < 400) {
        markGood();
        return;
      }
      // Keep the last good rows (marked stale) rather than an error text.
      d.shouldSwap = false;
      var why = st === 503 ? (d.xhr.responseText || "").trim().slice(0, 200) : "";
      markLost(why || "the master answered " + st);
      return;
    }
    if (st >= 200 && st < 400) { markGood(); }
    if (st >= 400 && type.indexOf("text/html") !== 0) {
      d.shouldSwap = false;
      var text = (d.xhr.responseText || "").trim().slice(0, 300);
      toast(false, actionName(d.elt) + " failed: the master answered " + st + (text ? ": " + text : "."));
    }
  });

  function unreachable(evt, what) {
    var elt = evt.detail.elt;
    markLost(what);
    if (!isLive(elt)) {
      toast(false, actionName(elt) + " did not reach the master (" + what + "): nothing was done. Try again when the connection is back.");
    }
  }
  document.addEventListener("htmx:sendError", function (evt) { unreachable(evt, "no connection"); });
  document.addEventListener("htmx:timeout", function (evt) { unreachable(evt, "no answer within 10s"); });

  document.addEventListener("click", function (evt) {
    var t = evt.target;
    if (!(t instanceof Element)) { return; }
    var dismiss = t.closest("[data-dismiss]");
    if (dismiss) {
      var msg = dismiss.closest(".flash");
      if (msg) { msg.remove(); }
      return;
    }
    var copy = t.closest("[data-copy]");
    if (copy) {
      var src = document.getElementById(copy.getAttribute("data-copy"));
      if (!src) { return; }
      var text = src.textContent.trim();
      var done = function (ok) {
        copy.textContent = ok ? "Copied" : "Select and copy";
        copy.setAttribute("data-copied", ok ? "yes" : "no");
        if (!ok) {
          var r = document.createRange();
          r.selectNodeContents(src);
          var s = window.getSelection();
          s.removeAllRanges();
          s.addRange(r);
        }
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
      } else {
        done(false);
      }
    }
  });
})();

// Bulk actions on the task list: the row checkboxes (.row-select, kept across
// the list's live refreshes by hx-preserve), "select all on this page"
// ([data-select-all]) and the bulk buttons ([data-bulk]), whose one
// confirmation names how many tasks and which. Nothing selected: the buttons
// are disabled.
(function () {
  "use strict";

  var shown = 5; // names a confirmation lists before "and N more"

  function rows() { return Array.prototype.slice.call(document.querySelectorAll("input.row-select")); }

  function update() {
    var all = document.querySelector("[data-select-all]");
    if (!all) { return; }
    var boxes = rows();
    var picked = boxes.filter(function (b) { return b.checked; });
    var n = picked.length;
    all.checked = n > 0 && n === boxes.length;
    all.indeterminate = n > 0 && n < boxes.length;
    var count = document.getElementById("bulk-count");
    if (count) { count.textContent = n === 0 ? "none selected" : n + " selected"; }
    var names = picked.slice(0, shown).map(function (b) { return b.getAttribute("data-title"); });
    var list = names.join(", ") + (n > shown ? " and " + (n - shown) + " more" : "");
    document.querySelectorAll("[data-bulk]").forEach(function (btn) {
      btn.disabled = n === 0;
      var note = btn.getAttribute("data-note");
      btn.setAttribute("hx-confirm", btn.getAttribute("data-label") + " " + n + (n === 1 ? " task: " : " tasks: ") + list + "?" +
        (note ? " " + note : ""));
    });
  }

  document.addEventListener("change", function (evt) {
    var t = evt.target;
    if (!(t instanceof Element)) { return; }
    if (t.hasAttribute("data-select-all")) {
      rows().forEach(function (b) { b.checked = t.checked; });
      update();
    } else if (t.classList.contains("row-select")) {
      update();
    }
  });
  // Rows come and go with every refresh of the list.
  document.addEventListener("htmx:afterSettle", update);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", update);
  } else {
    update();
  }
})();
