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
//   - a live region's refresh is held back (until its next poll) while a
//     pointer is pressed in it, so that a click never lands on a row the
//     refresh replaced between its press and its release;
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

  // text is a sentence of the page's language, rendered by the server into
  // the banner's data- attributes with %NAME% where a value goes; the
  // English fallback keeps a page without them readable.
  function text(name, fallback, vals) {
    var b = banner();
    var s = (b && b.getAttribute("data-" + name)) || fallback;
    Object.keys(vals || {}).forEach(function (k) { s = s.split("%" + k + "%").join(vals[k]); });
    return s;
  }

  function markLost(why) {
    lost = true;
    var b = banner();
    if (b) {
      b.textContent = text("lost", "Connection lost — retrying. Last good update %TIME%%WHY%.",
        { TIME: clock(lastGood), WHY: why ? text("why", " (%WHY%)", { WHY: why }) : "" });
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
      document.body.appendChild(box);
    }
    var p = document.createElement("p");
    p.className = "flash " + (ok ? "flash-ok" : "flash-error");
    p.appendChild(document.createTextNode(msg));
    var close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("data-dismiss", "");
    close.setAttribute("aria-label", text("dismiss-label", "Dismiss"));
    p.appendChild(close);
    box.replaceChildren(p);
    var a = document.getElementById("announcer");
    if (a) {
      a.textContent = "";
      window.setTimeout(function () { a.textContent = msg; }, 60);
    }
  }

  // actionName is how a message names what was pressed: "Disable bw1".
  function actionName(elt) {
    var btn = elt && elt.querySelector ? elt.querySelector("button[type=submit], button:not([type])") : null;
    var label = (btn || elt).textContent.trim();
    var who = btn ? (btn.getAttribute("data-node") || btn.getAttribute("data-user") || "") : "";
    if (who) { label += " " + who; }
    return label ? "“" + label + "”" : text("the-action", "The action");
  }

  document.addEventListener("htmx:beforeSend", function (evt) {
    // A hung master must end in an error, not a poll pending forever.
    if (isLive(evt.detail.elt)) { evt.detail.xhr.timeout = 10000; }
  });

  // pressedIn is the live region a pointer is pressed in (a click under
  // way), else null. Its refresh waits for the next poll rather than
  // replacing the rows under the press: a row swapped between the press and
  // the release loses the click (a checkbox not ticked, a button not
  // pressed), the preserved checkboxes included, which htmx moves.
  var pressedIn = null;
  document.addEventListener("pointerdown", function (evt) {
    var t = evt.target;
    pressedIn = t instanceof Element ? t.closest("[data-live]") : null;
  }, true);
  function released() { window.setTimeout(function () { pressedIn = null; }, 0); }
  document.addEventListener("pointerup", released, true);
  document.addEventListener("pointercancel", released, true);

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var d = evt.detail, st = d.xhr ? d.xhr.status : 0;
    var type = d.xhr ? (d.xhr.getResponseHeader("Content-Type") || "") : "";
    if (isLive(d.elt)) {
      if (st >= 200 && st < 400) {
        markGood();
        if (pressedIn && (pressedIn === d.elt || d.elt.contains(pressedIn) || pressedIn.contains(d.elt))) {
          d.shouldSwap = false;
        }
        return;
      }
      // Keep the last good rows (marked stale) rather than an error text.
      d.shouldSwap = false;
      var why = st === 503 ? (d.xhr.responseText || "").trim().slice(0, 200) : "";
      markLost(why || text("answered", "the master answered %STATUS%", { STATUS: st }));
      return;
    }
    if (st >= 200 && st < 400) { markGood(); }
    if (st >= 400 && type.indexOf("text/html") !== 0) {
      d.shouldSwap = false;
      var body = (d.xhr.responseText || "").trim().slice(0, 300);
      toast(false, text("failed", "%ACTION% failed: the master answered %STATUS%%TEXT%", {
        ACTION: actionName(d.elt), STATUS: st,
        TEXT: body ? text("text", ": %TEXT%", { TEXT: body }) : text("text-end", ".")
      }));
    }
  });

  function unreachable(evt, what) {
    var elt = evt.detail.elt;
    markLost(what);
    if (!isLive(elt)) {
      toast(false, text("unreached", "%ACTION% did not reach the master (%WHY%): nothing was done. Try again when the connection is back.",
        { ACTION: actionName(elt), WHY: what }));
    }
  }
  document.addEventListener("htmx:sendError", function (evt) { unreachable(evt, text("no-connection", "no connection")); });
  document.addEventListener("htmx:timeout", function (evt) { unreachable(evt, text("no-answer", "no answer within 10s")); });

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
      var value = src.textContent.trim();
      var done = function (ok) {
        copy.textContent = ok ? text("copied", "Copied") : text("copy-select", "Select and copy");
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
        navigator.clipboard.writeText(value).then(function () { done(true); }, function () { done(false); });
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

  // text: see the first part; the banner carries the page's sentences.
  function text(name, fallback, vals) {
    var b = document.getElementById("conn-status");
    var s = (b && b.getAttribute("data-" + name)) || fallback;
    Object.keys(vals || {}).forEach(function (k) { s = s.split("%" + k + "%").join(vals[k]); });
    return s;
  }

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
    if (count) { count.textContent = n === 0 ? text("none-selected", "none selected") : text("selected", "%N% selected", { N: n }); }
    var names = picked.slice(0, shown).map(function (b) { return b.getAttribute("data-title"); });
    var list = names.join(text("list-sep", ", ")) + (n > shown ? " " + text("more", "and %N% more", { N: n - shown }) : "");
    document.querySelectorAll("[data-bulk]").forEach(function (btn) {
      btn.disabled = n === 0;
      var note = btn.getAttribute("data-note");
      var ask = n === 1 ? text("confirm-one", "%ACTION% 1 task: %LIST%?", { ACTION: btn.getAttribute("data-label"), LIST: list })
        : text("confirm-many", "%ACTION% %N% tasks: %LIST%?", { ACTION: btn.getAttribute("data-label"), N: n, LIST: list });
      btn.setAttribute("hx-confirm", ask + (note ? " " + note : ""));
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

// Forms that guide:
//
//   - a refused form's error summary links each bad field ([data-field-link]):
//     following one opens the folded section (<details>) that holds it and
//     focuses it, or the first box of a group of checkboxes; a page loaded
//     with a bad group first ([data-focus-first]) focuses that box too;
//   - a text field with a length limit ([data-limit], with maxlength) shows a
//     counter ("187 / 200") once it is near the limit, and says so when a
//     paste was cut to the limit, instead of cutting it silently; the
//     sentences come from the field's data-counter and data-cut;
//   - the schedule preview (#schedule-preview, its fires as <time datetime>)
//     also says each fire in the reader's own time zone when it differs.
(function () {
  "use strict";

  function fill(tpl, vals) {
    var s = tpl || "";
    Object.keys(vals).forEach(function (k) { s = s.split("%" + k + "%").join(vals[k]); });
    return s;
  }

  // focusField focuses the control of a field (by id), opening what folds it.
  function focusField(id) {
    var target = document.getElementById(id);
    if (!target) { return false; }
    for (var d = target.closest("details"); d; d = d.parentElement ? d.parentElement.closest("details") : null) { d.open = true; }
    var control = target;
    if (target.matches("fieldset, div, section")) {
      control = target.querySelector("input:not([type=hidden]), select, textarea") || target;
    }
    var label = document.querySelector("label[for='" + control.id + "']") || target.querySelector("legend") || control;
    control.focus({ preventScroll: true });
    label.scrollIntoView({ block: "center" });
    return true;
  }

  document.addEventListener("click", function (evt) {
    var a = evt.target instanceof Element ? evt.target.closest("a[data-field-link]") : null;
    if (!a) { return; }
    var href = a.getAttribute("href") || "";
    if (href.charAt(0) !== "#") { return; }
    if (focusField(href.slice(1))) { evt.preventDefault(); }
  });

  function focusFirstGroup() {
    var g = document.querySelector("[data-focus-first]");
    if (g && (document.activeElement === document.body || !document.activeElement)) { focusField(g.id); }
  }

  // Length limits.
  function note(el, suffix, cls) {
    var id = el.id + suffix;
    var p = document.getElementById(id);
    if (!p) {
      p = document.createElement("p");
      p.id = id;
      p.className = "hint " + cls;
      p.hidden = true;
      if (cls === "paste-cut") { p.setAttribute("role", "status"); }
      el.insertAdjacentElement("afterend", p);
      var by = (el.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
      if (by.indexOf(id) < 0) { by.push(id); el.setAttribute("aria-describedby", by.join(" ")); }
    }
    return p;
  }

  function count(el) {
    var max = parseInt(el.getAttribute("data-limit"), 10);
    if (!(max > 0) || !el.id) { return; }
    var n = el.value.length;
    var near = n >= Math.floor(max * 0.85);
    var c = document.getElementById(el.id + "-count");
    if (!near && !c) { return; }
    c = note(el, "-count", "char-count");
    c.hidden = !near;
    c.textContent = fill(el.getAttribute("data-counter") || "%N% / %MAX%", { N: n, MAX: max });
    c.classList.toggle("at-limit", n >= max);
  }

  document.addEventListener("paste", function (evt) {
    var el = evt.target;
    if (!(el instanceof Element) || !el.hasAttribute("data-limit")) { return; }
    var max = parseInt(el.getAttribute("data-limit"), 10);
    var data = evt.clipboardData ? evt.clipboardData.getData("text") : "";
    var sel = (el.selectionEnd || 0) - (el.selectionStart || 0);
    var room = max - (el.value.length - sel);
    el.__cut = data.length > room;
  });

  document.addEventListener("input", function (evt) {
    var el = evt.target;
    if (!(el instanceof Element) || !el.hasAttribute("data-limit")) { return; }
    count(el);
    var cut = el.__cut;
    el.__cut = false;
    if (cut) {
      var p = note(el, "-cut", "paste-cut");
      p.textContent = fill(el.getAttribute("data-cut") || "The pasted text was cut to %MAX% characters.", { MAX: el.getAttribute("data-limit") });
      p.hidden = false;
    } else {
      var old = document.getElementById(el.id + "-cut");
      if (old) { old.hidden = true; }
    }
  });

  // The reader's zone in the schedule preview.
  function readerZone() {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return ""; }
  }

  function readerTimes() {
    var box = document.getElementById("schedule-preview");
    if (!box) { return; }
    var mine = readerZone();
    if (!mine || mine === box.getAttribute("data-zone")) { return; }
    // As the server writes the task's zone: weekday, then 2006-01-02 15:04:05
    // (the sv-SE form of a date is ISO's).
    var day, stamp;
    try {
      day = new Intl.DateTimeFormat(document.documentElement.lang || undefined, { timeZone: mine, weekday: "short" });
      stamp = new Intl.DateTimeFormat("sv-SE", { timeZone: mine, year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
    } catch (e) { return; }
    var fmt = { format: function (d) { return day.format(d) + " " + stamp.format(d); } };
    box.querySelectorAll("time[datetime]").forEach(function (t) {
      if (t.parentElement.querySelector(".reader-time")) { return; }
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      var s = document.createElement("span");
      s.className = "hint reader-time";
      s.textContent = fill(box.getAttribute("data-reader-time") || "your time (%ZONE%): %TIME%", { ZONE: mine, TIME: fmt.format(d) });
      t.parentElement.appendChild(s);
    });
  }

  function onLoad() {
    focusFirstGroup();
    document.querySelectorAll("[data-limit]").forEach(count);
    readerTimes();
  }
  document.addEventListener("htmx:afterSettle", readerTimes);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", onLoad);
  } else {
    onLoad();
  }
})();

// Focus survives actions. An action (a Connect, Start, Kill, Cancel or bulk
// button) swaps the part of the page it acted on, and the button pressed
// goes with it: the focus would fall to <body>, and a keyboard user would
// start again from the top. After the swap the focus goes back to the same
// row (or block of buttons), to the control that comes next (Connect ->
// Enable), the same action when it is still offered (Run now), or the
// control at the same place; when the row is gone (Delete, Cancel, bulk
// actions), to the result message. The message itself is said by the page's
// one polite live region (#announcer, in the layout), which outlives every
// swap: a region swapped in with its text is not read out.
(function () {
  "use strict";

  // next lists the controls that naturally follow an action in its row.
  var next = {
    connect: ["enable", "disable"], enable: ["disable"], disable: ["enable"], approve: ["connect", "enable"],
    start: ["stop", "pause"], stop: ["start"], pause: ["resume", "stop"], resume: ["pause", "stop"]
  };

  var pressed = null; // what was pressed, between the request and its swap

  function controls(box) {
    return Array.prototype.slice.call(box.querySelectorAll("button, a.btn")).filter(function (c) {
      return !c.disabled && c.getAttribute("aria-disabled") !== "true" && c.getClientRects().length > 0;
    });
  }

  function announce(msg) {
    var a = document.getElementById("announcer");
    if (!a || !msg) { return; }
    // Emptied first, filled a moment later: the same sentence twice in a
    // row is read twice.
    a.textContent = "";
    window.setTimeout(function () { a.textContent = msg; }, 60);
  }

  // A message a full page load brought (after a form was saved) is said too.
  function onLoad() {
    var msg = document.querySelector("#flash .flash");
    if (msg) { announce(msg.textContent.trim()); }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", onLoad);
  } else {
    onLoad();
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt || !elt.matches || !elt.matches("form[hx-post], button[hx-post]")) { return; }
    var btn = document.activeElement;
    if (!btn || !(btn === elt || elt.contains(btn))) {
      btn = elt.matches("button") ? elt : elt.querySelector("button[type=submit], button:not([type])");
    }
    if (!btn) { return; }
    var box = btn.closest("tr[id]") || btn.closest(".actions");
    var holder = box && (box.id ? box : box.parentElement.closest("[id]"));
    var list = box ? controls(box) : [];
    pressed = {
      elt: elt,
      action: btn.getAttribute("data-action") || "",
      holder: holder ? holder.id : "",
      inner: box && !box.id ? ".actions" : "",
      index: Math.max(0, list.indexOf(btn)),
      bulk: btn.hasAttribute("data-bulk")
    };
  });

  document.addEventListener("htmx:afterSettle", function (evt) {
    var p = pressed;
    // A live region's refresh may settle while the action is on its way:
    // only the action's own swap is its outcome.
    var cfg = evt.detail.requestConfig;
    if (!p || !cfg || cfg.elt !== p.elt) { return; }
    pressed = null;
    var msg = document.querySelector("#flash .flash");
    if (msg) { announce(msg.textContent.trim()); }
    var active = document.activeElement;
    if (active && active !== document.body && document.contains(active)) { return; }
    var holder = p.holder ? document.getElementById(p.holder) : null;
    var box = holder && p.inner ? holder.querySelector(p.inner) : holder;
    var list = box && !p.bulk ? controls(box) : [];
    var pick = null;
    var want = (next[p.action] || []).concat([p.action]);
    for (var i = 0; i < want.length && !pick && want[i]; i++) {
      for (var j = 0; j < list.length; j++) {
        if (list[j].getAttribute("data-action") === want[i]) { pick = list[j]; break; }
      }
    }
    if (!pick && list.length > 0 && !(p.action === "kill" || p.action === "cancel" || p.action === "delete")) {
      pick = list[Math.min(p.index, list.length - 1)];
    }
    if (!pick && msg) {
      msg.setAttribute("tabindex", "-1");
      pick = msg;
    }
    if (!pick && p.bulk) { pick = document.getElementById("select-all"); }
    if (pick) { pick.focus(); }
  });
})();
