"""The report page's style sheet and script (`report/html.py` writes the page): read by a screen reader and at any
zoom too. The text of a chart's point or a table cell's hover is its accessible name or description, never only the
tooltip's; a keyboard focus shows it as a hover does.
"""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2329;background:#fff}
header{padding:16px 24px 8px;border-bottom:1px solid #dde2e6;position:sticky;top:0;background:#fff;z-index:2}
h1{margin:0 0 4px;font-size:20px} h2{font-size:17px;margin:28px 0 10px} h3{font-size:14px;margin:18px 0 6px}
.summary{margin:0 0 6px;color:#4a5560} nav a{margin-right:14px;color:#1f5fa8;text-decoration:none}
main{padding:0 24px 24px} footer{padding:12px 24px;color:#6a747d;font-size:12px;border-top:1px solid #dde2e6}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e6e9ec;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f4f6f8;font-weight:600} td.num{text-align:right} tbody th{background:none;font-weight:400}
td.best{font-weight:700;color:#19692c} td.failed,td.timeout{color:#b3261e} td.unsupported,td.oom{color:#687078}
td.pending{color:#946000} [data-tip]{cursor:default}
figure.chart{display:inline-block;margin:8px 16px 16px 0;vertical-align:top;max-width:100%}
figure.chart svg{max-width:100%;height:auto;display:block}
figure.chart svg *{pointer-events:none} figure.chart svg g.tip,figure.chart svg g.tip *{pointer-events:auto}
figure.chart g.tip:hover,figure.chart g.tip:focus{opacity:.75}
figure.chart g.tip:focus{outline:2px solid #1f5fa8} td[data-tip]:focus{outline:2px solid #1f5fa8;outline-offset:-2px}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
figcaption{font-size:12px;color:#6a747d;max-width:640px}
.legend,.note,.citation,.none{color:#4a5560;font-size:13px;max-width:900px}
table.env tbody th{font-family:ui-monospace,monospace;font-size:12px}
code{font-size:12px;background:#f4f6f8;padding:1px 4px;border-radius:3px}
.wide{overflow-x:auto;max-width:100%} p,code,h3,figcaption{overflow-wrap:anywhere}
@media (max-width:640px),(max-height:480px){header{position:static} header,main,footer{padding-left:10px;
 padding-right:10px}}
#tip{position:fixed;z-index:10;pointer-events:none;white-space:pre-line;background:#1d2329;color:#fff;
 padding:6px 9px;border-radius:4px;font-size:12px;max-width:420px;box-shadow:0 2px 8px rgba(0,0,0,.25)}
"""

# Hover text is set with textContent: whatever a name holds, it is shown, never run.
SCRIPT = """
(function () {
  "use strict";
  var tip = document.getElementById("tip");
  function place(x, y) {
    var w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.max(4, Math.min(x + 14, window.innerWidth - w - 4)) + "px";
    tip.style.top = Math.max(4, Math.min(y + 14, window.innerHeight - h - 4)) + "px";
  }
  function show(el, x, y) { tip.textContent = el.getAttribute("data-tip"); tip.hidden = false; place(x, y); }
  function hide() { tip.hidden = true; }
  document.querySelectorAll("[data-tip]").forEach(function (el) {
    var title = el.querySelector(":scope > title");
    if (title) { title.remove(); }  // shown by the script (a native tooltip: twice); its aria-label stays
    el.addEventListener("mouseenter", function (e) { show(el, e.clientX, e.clientY); });
    el.addEventListener("mousemove", function (e) { place(e.clientX, e.clientY); });
    el.addEventListener("mouseleave", hide);
    el.addEventListener("focus", function () { var r = el.getBoundingClientRect(); show(el, r.right, r.top); });
    el.addEventListener("blur", hide);
  });
  // a table wider than its box: a tab stop a keyboard scrolls, a region named by its caption; none where it fits
  function scrollable() {
    document.querySelectorAll("div.wide").forEach(function (box) {
      var caption = box.querySelector("caption");
      if (box.scrollWidth > box.clientWidth && caption) {
        box.tabIndex = 0; box.setAttribute("role", "region"); box.setAttribute("aria-labelledby", caption.id);
      } else {
        box.removeAttribute("tabindex"); box.removeAttribute("role"); box.removeAttribute("aria-labelledby");
      }
    });
  }
  scrollable();
  window.addEventListener("resize", scrollable);
})();
"""
