// The page of the HTML report (report_html.cpp): CSS, the JSON data island and a small
// renderer that draws everything as SVG from that JSON. Self-contained: no network, no fonts
// other than the system's. @@GROWTRACE_TITLE@@ and @@GROWTRACE_DATA@@ are filled in.
#pragma once

namespace growtrace {

inline constexpr const char* kHtmlReportTemplate = R"GTHTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@GROWTRACE_TITLE@@</title>
<script>
// Installed first so that errors of the renderer below (even syntax errors) show on the page.
window.onerror = function (message, source, line, column) {
  var box = document.getElementById('gt-errors');
  if (!box) { window.__gtEarlyErrors = (window.__gtEarlyErrors || []).concat([String(message)]); return false; }
  box.style.display = 'block';
  box.appendChild(document.createTextNode('report error: ' + message + ' (line ' + line + ':' + column + ')\n'));
  return false;
};
</script>
<style>
:root { --fg:#1d2330; --muted:#5d6677; --line:#d9dee7; --bg:#ffffff; --panel:#f6f8fb;
        --bad:#c62828; --bad-bg:#fdecea; --ok:#2e7d32; --ok-bg:#e8f5e9; --heap:#1565c0; --rss:#8e24aa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); }
main { max-width: 1160px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 30px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 0 0 6px; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
.verdict { display: inline-block; padding: 6px 12px; border-radius: 6px; font-weight: 600; margin: 10px 0 4px; }
.verdict.bad { background: var(--bad-bg); color: var(--bad); }
.verdict.good { background: var(--ok-bg); color: var(--ok); }
.facts { display: flex; flex-wrap: wrap; gap: 6px 22px; margin: 8px 0; }
.facts div b { display: block; font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; }
.card { border: 1px solid var(--line); border-left: 4px solid var(--bad); border-radius: 6px; padding: 14px 16px; margin: 14px 0; background: #fff; }
.card .where { font-size: 12.5px; color: var(--muted); margin-bottom: 6px; word-break: break-all; }
.grid { display: grid; grid-template-columns: minmax(0, 1.35fr) minmax(0, 1fr); gap: 16px; align-items: start; }
@media (max-width: 900px) { .grid { grid-template-columns: 1fr; } }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px 3px 0; vertical-align: top; }
th { font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; }
table.kv td:first-child { color: var(--muted); white-space: nowrap; width: 1%; padding-right: 14px; }
table.list { font-size: 13px; }
table.list tr + tr td { border-top: 1px solid var(--line); }
.reason { background: var(--panel); border-radius: 4px; padding: 6px 8px; margin: 8px 0; font-size: 13px; }
ol.stack { margin: 6px 0 0; padding-left: 26px; font-size: 12.5px; max-height: 320px; overflow: auto; }
ol.stack li { padding: 1px 0; word-break: break-all; }
ol.stack .fn { font-weight: 600; }
ol.stack .py { color: #2b6cb0; }
ol.stack .loc { color: var(--muted); }
.tag { display: inline-block; font-size: 10.5px; padding: 0 5px; border-radius: 3px; background: #e3e8f0; color: #3b4556; margin-left: 4px; vertical-align: 1px; }
.tag.py { background: #dbeafe; color: #1e4e8c; }
.tag.cls-unbounded { background: var(--bad-bg); color: var(--bad); }
.tag.cls-bounded { background: #e3f2fd; color: #1565c0; }
.tag.cls-transient { background: #f3e5f5; color: #6a1b9a; }
.tag.cls-undetermined { background: #fff8e1; color: #8d6e00; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
.chart { width: 100%; height: auto; display: block; }
.flame { width: 100%; display: block; cursor: pointer; }
.flame rect { stroke: #fff; stroke-width: 0.5; }
.flame g:hover rect { stroke: #222; stroke-width: 1; }
.caption { font-size: 12.5px; color: var(--muted); margin: 4px 0 8px; }
.warn { background: #fff8e1; border: 1px solid #ffe082; border-radius: 4px; padding: 6px 10px; margin: 6px 0; font-size: 13px; }
#gt-errors { display: none; white-space: pre-wrap; background: #fdecea; color: #b71c1c; border: 1px solid #ef9a9a; padding: 8px 10px; border-radius: 4px; font-family: monospace; }
</style>
</head>
<body>
<main>
<div id="gt-errors"></div>
<div id="gt-report"><noscript>This report is drawn by JavaScript; the data is in the <code>growtrace-data</code> script element of this file.</noscript></div>
</main>
<script type="application/json" id="growtrace-data">@@GROWTRACE_DATA@@</script>
<script>
(function () {
'use strict';
var early = window.__gtEarlyErrors || [];
for (var i = 0; i < early.length; i++) window.onerror(early[i], '', 0, 0);

var SVGNS = 'http://www.w3.org/2000/svg';
var data = JSON.parse(document.getElementById('growtrace-data').textContent);
var root = document.getElementById('gt-report');
var COLORS = ['#c62828', '#ef6c00', '#6d4c41', '#ad1457', '#00838f', '#558b2f', '#4527a0', '#f9a825'];

// ---- small helpers -------------------------------------------------------------------------
function el(tag, attrs, children) {
  var e = document.createElement(tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}
function svg(tag, attrs, children) {
  var e = document.createElementNS(SVGNS, tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}
function setAttrs(e, attrs) {
  if (!attrs) return;
  for (var k in attrs) {
    if (attrs[k] === undefined || attrs[k] === null) continue;
    if (k === 'text') e.textContent = attrs[k];
    else e.setAttribute(k, attrs[k]);
  }
}
function append(e, children) {
  if (children === undefined || children === null) return;
  if (!Array.isArray(children)) children = [children];
  children.forEach(function (c) {
    if (c === undefined || c === null || c === false) return;
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  });
}
function num(x) { var n = Number(x); return isFinite(n) ? n : 0; }
// Decimal units, as the text report and top use.
function bytes(b) {
  b = num(b);
  var units = ['B', 'KB', 'MB', 'GB', 'TB'], u = 0, neg = b < 0;
  b = Math.abs(b);
  while (b >= 1000 && u < 4) { b /= 1000; u++; }
  var s = u === 0 ? Math.round(b) + ' B' : b.toFixed(b < 10 ? 2 : 1) + ' ' + units[u];
  return (neg ? '-' : '') + s;
}
function seconds(s) {
  s = num(s);
  if (s === 0) return '0 s';
  if (Math.abs(s) < 1) return (s * 1000).toFixed(0) + ' ms';
  if (Math.abs(s) < 120) return s.toFixed(s < 10 ? 2 : 1) + ' s';
  return (s / 60).toFixed(1) + ' min';
}
function count(n) { return num(n).toLocaleString('en-US'); }
// A sampled trace's sizes and counts are estimates (JSON sampling.mean_bytes > 0): shown with
// one standard error and the samples behind them.
function sampled() { return num((data.sampling || {}).mean_bytes) > 0; }
function estBytes(b, se, n) {
  if (!sampled()) return bytes(b);
  return bytes(b) + ' \u00b1 ' + bytes(se) + (n === undefined ? '' : ' (' + count(n) + ' sample' + (num(n) === 1 ? '' : 's') + ')');
}
function estCount(n) { return (sampled() ? '\u2248 ' : '') + count(n); }
function basename(p) { p = String(p || ''); var i = p.lastIndexOf('/'); return i < 0 ? p : p.slice(i + 1); }
function frameLabel(f) { return f && f.function ? f.function : '??'; }
function frameWhere(f) {
  if (!f) return '';
  var w = f.file ? basename(f.file) + (f.line ? ':' + f.line : '') : '';
  return w;
}
function isPython(f) { return f && f.module === 'python'; }
// The frame that names a group: the innermost frame that is not an allocator entry point.
var ALLOCATOR = /^(operator new|operator new\[\]|malloc|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|PyMem_|PyObject_Malloc|PyObject_Calloc|PyObject_Realloc|_PyObject_|__libc_|std::__new_allocator|__gnu_cxx::new_allocator|std::allocator)/;
// Library internals (containers, allocator traits) are skipped too: the caller is the news.
var LIBRARY = /^(std::|__gnu_cxx::|__cxx|void std::|.*\bstd::.*::(allocate|_M_allocate|construct)\b)/;
function keyFrame(frames) {
  frames = frames || [];
  for (var pass = 0; pass < 2; pass++) {
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i], fn = f.function || '';
      if (ALLOCATOR.test(fn) || (f.module || '') === 'libgrowtrace.so') continue;
      if (pass === 0 && (LIBRARY.test(fn) || /^\/usr\/include\//.test(f.file || ''))) continue;
      return f;
    }
  }
  return frames[0];
}
function shorten(text, max) { text = String(text); return text.length > max ? text.slice(0, max - 1) + '\u2026' : text; }
function groupTitle(g) {
  var f = keyFrame(g.frames);
  if (!f) return '(no stack)';
  var w = frameWhere(f);
  return frameLabel(f) + (w ? ' (' + w + ')' : '');
}
function timeline() { return Array.isArray(data.timeline) ? data.timeline : []; }
function seriesPoints(values) {
  var tl = timeline(), pts = [];
  if (!Array.isArray(values)) return pts;
  for (var i = 0; i < values.length && i < tl.length; i++) pts.push([num(tl[i].t), num(values[i])]);
  if (pts.length && pts[0][0] > 0) pts.unshift([0, 0]);
  return pts;
}

// ---- line charts ---------------------------------------------------------------------------
function niceStep(range, ticks) {
  if (!(range > 0)) return 1;
  var raw = range / ticks, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10) * mag;
}
// series: [{name, color, points: [[t, v]...], axis: 'left'|'right', format, dash, fill}]
function lineChart(series, opts) {
  opts = opts || {};
  var W = opts.width || 1000, H = opts.height || 260;
  var hasRight = series.some(function (s) { return s.axis === 'right' && s.points.length; });
  var M = { l: 70, r: hasRight ? 70 : 18, t: 14, b: 44 };
  var pw = W - M.l - M.r, ph = H - M.t - M.b;
  var tmax = 0;
  series.forEach(function (s) { s.points.forEach(function (p) { tmax = Math.max(tmax, p[0]); }); });
  if (opts.tmax) tmax = Math.max(tmax, opts.tmax);
  if (!(tmax > 0)) tmax = 1;
  function axisMax(axis) {
    var m = 0;
    series.forEach(function (s) { if ((s.axis || 'left') === axis) s.points.forEach(function (p) { m = Math.max(m, p[1]); }); });
    return m > 0 ? m : 1;
  }
  var ymax = { left: axisMax('left'), right: axisMax('right') };
  var ystep = { left: niceStep(ymax.left, 5), right: niceStep(ymax.right, 5) };
  ymax.left = Math.ceil(ymax.left / ystep.left) * ystep.left;
  ymax.right = Math.ceil(ymax.right / ystep.right) * ystep.right;
  var fmt = { left: opts.leftFormat || bytes, right: opts.rightFormat || count };
  function X(t) { return M.l + (t / tmax) * pw; }
  function Y(v, axis) { return M.t + ph - (v / ymax[axis || 'left']) * ph; }
  var g = svg('svg', { 'class': 'chart', viewBox: '0 0 ' + W + ' ' + (H + 22), role: 'img',
                       'aria-label': opts.label || 'chart' });
  g.appendChild(svg('rect', { x: M.l, y: M.t, width: pw, height: ph, fill: '#fbfcfe', stroke: '#d9dee7' }));
  for (var v = 0; v <= ymax.left + 1e-9; v += ystep.left) {
    g.appendChild(svg('line', { x1: M.l, x2: M.l + pw, y1: Y(v), y2: Y(v), stroke: '#e6e9ef' }));
    g.appendChild(svg('text', { x: M.l - 6, y: Y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#5d6677', text: fmt.left(v) }));
  }
  if (hasRight) {
    for (var v2 = 0; v2 <= ymax.right + 1e-9; v2 += ystep.right)
      g.appendChild(svg('text', { x: M.l + pw + 6, y: Y(v2, 'right') + 4, 'font-size': 11, fill: '#5d6677', text: fmt.right(v2) }));
  }
  var tstep = niceStep(tmax, 8);
  for (var t = 0; t <= tmax + 1e-9; t += tstep) {
    g.appendChild(svg('line', { x1: X(t), x2: X(t), y1: M.t + ph, y2: M.t + ph + 4, stroke: '#8a93a3' }));
    g.appendChild(svg('text', { x: X(t), y: M.t + ph + 17, 'text-anchor': 'middle', 'font-size': 11, fill: '#5d6677', text: seconds(t) }));
  }
  g.appendChild(svg('text', { x: M.l + pw / 2, y: M.t + ph + 34, 'text-anchor': 'middle', 'font-size': 11, fill: '#5d6677', text: 'time since process start' }));
  var lx = M.l, ly = H + 8;
  series.forEach(function (s) {
    if (!s.points.length) return;
    var d = '';
    s.points.forEach(function (p, i) { d += (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ',' + Y(p[1], s.axis).toFixed(1); });
    if (s.fill) {
      var last = s.points[s.points.length - 1], first = s.points[0];
      g.appendChild(svg('path', { d: d + 'L' + X(last[0]).toFixed(1) + ',' + Y(0) + 'L' + X(first[0]).toFixed(1) + ',' + Y(0) + 'Z',
                                  fill: s.color, 'fill-opacity': 0.12, stroke: 'none' }));
    }
    g.appendChild(svg('path', { d: d, fill: 'none', stroke: s.color, 'stroke-width': s.width || 2,
                                'stroke-dasharray': s.dash || null, 'stroke-linejoin': 'round', 'class': 'series' },
                      svg('title', { text: s.name })));
    var label = s.name + (s.axis === 'right' ? ' (right axis)' : '');
    var lw = 34 + label.length * 6.4;
    if (lx > M.l && lx + lw > W) { lx = M.l; ly += 18; }  // next legend row
    g.appendChild(svg('rect', { x: lx, y: ly, width: 14, height: 4, fill: s.color }));
    g.appendChild(svg('text', { x: lx + 19, y: ly + 6, 'font-size': 11.5, fill: '#1d2330', text: label }));
    lx += lw;
  });
  g.setAttribute('viewBox', '0 0 ' + W + ' ' + (ly + 14));
  if (!series.some(function (s) { return s.points.length; }))
    g.appendChild(svg('text', { x: M.l + pw / 2, y: M.t + ph / 2, 'text-anchor': 'middle', fill: '#5d6677', text: 'no samples' }));
  return g;
}

// ---- flame graphs (icicles: the outermost frame on top) ------------------------------------
function buildTree(items) {
  var tree = { name: 'all', value: 0, children: {}, order: [], cls: null, finding: false };
  items.forEach(function (it) {
    if (!(it.value > 0)) return;
    tree.value += it.value;
    var node = tree;
    var frames = (it.frames || []).slice().reverse();
    if (!frames.length) frames = [{ function: it.label || '(no stack)' }];
    frames.forEach(function (f) {
      var label = frameLabel(f), where = frameWhere(f);
      var key = label + '\u0001' + where + '\u0001' + (f.module || '');
      var child = node.children[key];
      if (!child) {
        child = node.children[key] = { name: label, where: where, module: f.module || '', python: isPython(f),
                                       value: 0, children: {}, order: [], finding: false };
        node.order.push(key);
      }
      child.value += it.value;
      if (it.finding) child.finding = true;
      node = child;
    });
    node.cls = it.cls;
  });
  return tree;
}
function flameColor(n, depth) {
  var h = 0;
  for (var i = 0; i < n.name.length; i++) h = (h * 31 + n.name.charCodeAt(i)) >>> 0;
  var jitter = (h % 20) - 10;
  if (n.synthetic) return '#cfd5df';
  if (n.finding) return 'hsl(' + (8 + jitter / 2) + ', 78%, ' + (56 + (h % 12)) + '%)';
  if (n.python) return 'hsl(' + (205 + jitter) + ', 60%, ' + (68 + (h % 10)) + '%)';
  return 'hsl(' + (40 + jitter) + ', 62%, ' + (64 + (h % 12)) + '%)';
}
function flameGraph(items, opts) {
  var W = 1000, ROW = 18;
  var tree = buildTree(items);
  var box = el('div');
  var info = el('div', { 'class': 'caption mono', text: 'click a frame to zoom in, the top bar to zoom out' });
  function depthOf(n) { var d = 0; n.order.forEach(function (k) { d = Math.max(d, depthOf(n.children[k])); }); return d + 1; }
  function draw(focus) {
    var depth = depthOf(focus.node) + focus.path.length;
    var H = depth * ROW + 2;
    var g = svg('svg', { 'class': 'flame', viewBox: '0 0 ' + W + ' ' + H, width: '100%', role: 'img', 'aria-label': opts.label || 'flame graph' });
    // The path from the root to the focused node is drawn full width.
    focus.path.forEach(function (n, d) { cell(g, n, 0, W, d, function () { draw(focusOn(n, focus.path.slice(0, d))); }); });
    layout(g, focus.node, 0, W, focus.path.length, focus.path);
    while (box.firstChild) box.removeChild(box.firstChild);
    box.appendChild(g);
    box.appendChild(info);
  }
  function focusOn(n, path) { return { node: n, path: path }; }
  function cell(g, n, x, w, d, onclick) {
    var pct = tree.value > 0 ? (100 * n.value / tree.value).toFixed(1) + '%' : '';
    var title = n.name + (n.where ? '  ' + n.where : '') + (n.module && n.module !== 'python' ? '  [' + n.module + ']' : '') +
                '\n' + bytes(n.value) + ' (' + pct + ' of ' + (opts.what || 'total') + ')';
    var grp = svg('g', null, svg('title', { text: title }));
    grp.appendChild(svg('rect', { x: x.toFixed(2), y: d * ROW, width: Math.max(w, 0.5).toFixed(2), height: ROW - 1, fill: flameColor(n, d), rx: 1.5 }));
    if (w > 36) {
      var chars = Math.floor((w - 8) / 6.6);
      var label = n.name + ' ' + bytes(n.value);
      if (label.length > chars) label = label.slice(0, Math.max(chars - 1, 1)) + '\u2026';
      grp.appendChild(svg('text', { x: x + 4, y: d * ROW + 13, 'font-size': 11.5, fill: '#1d2330', text: label }));
    }
    grp.addEventListener('click', function (ev) { ev.stopPropagation(); onclick(); });
    g.appendChild(grp);
  }
  function layout(g, n, x, w, d, path) {
    path = path || [];
    var here = path;
    cell(g, n, x, w, d, function () { draw(focusOn(n, here)); });
    var cx = x;
    var kids = n.order.map(function (k) { return n.children[k]; }).sort(function (a, b) { return b.value - a.value; });
    kids.forEach(function (c) {
      var cw = n.value > 0 ? w * c.value / n.value : 0;
      if (cw >= 0.3) layout(g, c, cx, cw, d + 1, here.concat([n]));
      cx += cw;
    });
  }
  if (!(tree.value > 0)) {
    box.appendChild(el('p', { 'class': 'muted', text: opts.empty || 'nothing to show' }));
    return box;
  }
  draw(focusOn(tree, []));
  return box;
}

// ---- page sections -------------------------------------------------------------------------
function facts(pairs) {
  return el('div', { 'class': 'facts' }, pairs.filter(Boolean).map(function (p) {
    return el('div', null, [el('b', { text: p[0] }), p[1]]);
  }));
}
function kvTable(rows) {
  return el('table', { 'class': 'kv' }, rows.filter(Boolean).map(function (r) {
    return el('tr', null, [el('td', { text: r[0] }), el('td', null, r[1])]);
  }));
}
function stackList(frames, max) {
  frames = frames || [];
  max = max || 40;
  var ol = el('ol', { 'class': 'stack mono' });
  frames.slice(0, max).forEach(function (f) {
    var where = f.file ? f.file + (f.line ? ':' + f.line : '') : '';
    ol.appendChild(el('li', null, [
      el('span', { 'class': 'fn' + (isPython(f) ? ' py' : ''), text: frameLabel(f) }),
      isPython(f) ? el('span', { 'class': 'tag py', text: 'py' }) : (f.module ? el('span', { 'class': 'tag', text: f.module }) : null),
      where ? el('span', { 'class': 'loc', text: '  ' + where }) : null
    ]));
  });
  if (frames.length > max) ol.appendChild(el('li', { 'class': 'muted', text: '\u2026 ' + (frames.length - max) + ' more frames' }));
  if (!frames.length) ol.appendChild(el('li', { 'class': 'muted', text: 'no stack' }));
  return ol;
}
function header() {
  var findings = data.findings || [];
  var t = data.totals || {};
  var box = el('section');
  box.appendChild(el('h1', { text: 'growtrace report' }));
  box.appendChild(el('div', { 'class': 'mono', text: data.command || '(unknown command)' }));
  var bad = findings.length > 0;
  box.appendChild(el('div', { 'class': 'verdict ' + (bad ? 'bad' : 'good'),
    text: bad ? findings.length + ' unbounded growth finding' + (findings.length === 1 ? '' : 's') +
                ', ' + bytes(findings.reduce(function (a, f) { return a + num(f.retained_bytes); }, 0)) + ' retained'
              : 'no unbounded growth found' }));
  box.appendChild(facts([
    ['pid', String(data.pid)],
    ['duration', seconds(data.duration_s)],
    ['allocations', estCount(t.allocations)],
    ['frees', estCount(t.frees)],
    ['traced heap peak', bytes(t.peak_bytes)],
    ['retained at end', bytes(t.retained_bytes) + ' in ' + estCount(t.live_allocations) + ' blocks'],
    sampled() ? ['sampling', 'one sample per ' + bytes(data.sampling.mean_bytes) + ' allocated on average (' +
                 count(t.samples) + ' samples); sizes and counts are estimates, cache entries and classes exact'] : null,
    ['analysis window', seconds(data.window_s)],
    ['trace', 'format v' + data.trace_format_version + (data.ended_cleanly ? '' : ', no end record')]
  ]));
  (data.warnings || []).forEach(function (w) { box.appendChild(el('div', { 'class': 'warn', text: 'warning: ' + w })); });
  return box;
}
function memorySection() {
  var tl = timeline();
  var box = el('section');
  box.appendChild(el('h2', { text: 'Memory over time' }));
  var series = [{ name: 'traced heap (retained)', color: '#1565c0', fill: true,
                  points: seriesPoints(tl.map(function (p) { return p.heap_bytes; })) }];
  var rss = tl.filter(function (p) { return num(p.rss_bytes) > 0; });
  if (rss.length) series.push({ name: 'RSS (time marks)', color: '#8e24aa', dash: '6 4',
                                points: rss.map(function (p) { return [num(p.t), num(p.rss_bytes)]; }) });
  (data.findings || []).slice(0, COLORS.length).forEach(function (f, i) {
    var pts = seriesPoints(f.retained_series);
    var extra = findingExtra(f);
    if (!pts.length && extra) cacheSeries(extra).forEach(function (c) { if (c.isBytes && !pts.length) pts = c.points; });
    series.push({ name: '#' + (i + 1) + ' ' + shorten(frameLabel(keyFrame(f.frames)), 48), color: COLORS[i], width: 1.5, points: pts });
  });
  box.appendChild(lineChart(series, { height: 280, label: 'memory over time', tmax: num(data.duration_s) }));
  box.appendChild(el('div', { 'class': 'caption',
    text: 'Traced heap: bytes allocated and not yet freed at the end of each ' + seconds(data.window_s) +
          ' window. RSS: resident set size sampled by the tracer\u2019s time marks' + (rss.length ? '' : ' (none in this trace)') +
          '. Thin lines: the findings below.' }));
  return box;
}
function timeKey(o) {
  var keys = Object.keys(o);
  for (var i = 0; i < keys.length; i++) if (/^(t|t_s|time|time_s|seconds)$/.test(keys[i])) return keys[i];
  return null;
}
function cacheSeries(cache) {
  // The cache object's time series, whatever it calls them: arrays of {t or t_s, <number>} or
  // of numbers aligned with the timeline. Byte series go on the left axis, counts on the right.
  var out = [];
  Object.keys(cache).forEach(function (k) {
    var v = cache[k];
    if (!Array.isArray(v) || !v.length) return;
    var isBytes = /bytes|retained/.test(k);
    if (Array.isArray(v[0]) && v[0].length === 2 && typeof v[0][0] === 'number') {
      out.push({ name: k.replace(/_/g, ' '), isBytes: isBytes, points: v.map(function (p) { return [num(p[0]), num(p[1])]; }) });
    } else if (typeof v[0] === 'object' && v[0] !== null && !Array.isArray(v[0]) && timeKey(v[0])) {
      var tk = timeKey(v[0]);
      var field = Object.keys(v[0]).filter(function (f) { return f !== tk && typeof v[0][f] === 'number'; })[0];
      if (field) out.push({ name: k.replace(/_/g, ' '), isBytes: isBytes,
                            points: v.map(function (p) { return [num(p[tk]), num(p[field])]; }) });
    } else if (typeof v[0] === 'number' && /series|entries|sizes|over_time/.test(k) && v.length > 1) {
      out.push({ name: k.replace(/_/g, ' '), isBytes: isBytes, points: seriesPoints(v) });
    }
  });
  return out;
}
// The kind-specific object of a finding: `cache` (cache_growth), `type` (duplicate_types).
function findingExtra(f) {
  var x = f.cache || f.type;
  return x && typeof x === 'object' && !Array.isArray(x) ? x : null;
}
function cacheBlock(cache, heading) {
  var box = el('div');
  if (heading) box.appendChild(el('h3', { text: heading }));
  var rows = [];
  Object.keys(cache).forEach(function (k) {
    var v = cache[k];
    if (v === null || typeof v === 'object') return;
    var shown = typeof v === 'number' && /bytes/.test(k) ? bytes(v) : typeof v === 'number' && /_s$/.test(k) ? seconds(v) : String(v);
    rows.push([k.replace(/_/g, ' '), shown]);
  });
  box.appendChild(kvTable(rows));
  Object.keys(cache).forEach(function (k) {
    var v = cache[k];
    if (!Array.isArray(v) || !v.length) return;
    if (typeof v[0] === 'string') {
      box.appendChild(el('div', { 'class': 'caption', text: k.replace(/_/g, ' ') }));
      box.appendChild(el('ul', { 'class': 'mono' }, v.slice(0, 20).map(function (s) { return el('li', { text: s }); })));
    } else if (typeof v[0] === 'object' && v[0] !== null && 'function' in v[0]) {
      box.appendChild(el('div', { 'class': 'caption', text: k.replace(/_/g, ' ') + ' (innermost first)' }));
      box.appendChild(stackList(v, 16));
    } else if (typeof v[0] === 'object' && v[0] !== null && !Array.isArray(v[0]) && !timeKey(v[0])) {
      box.appendChild(el('div', { 'class': 'caption', text: k.replace(/_/g, ' ') }));
      box.appendChild(el('ul', { 'class': 'mono' }, v.slice(0, 20).map(function (o) {
        return el('li', { text: Object.keys(o).map(function (f) { return typeof o[f] === 'object' ? '' : f + ': ' + o[f]; }).filter(Boolean).join(', ') });
      })));
    }
  });
  Object.keys(cache).forEach(function (k) {
    var v = cache[k];
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      box.appendChild(el('div', { 'class': 'caption', text: k.replace(/_/g, ' ') }));
      box.appendChild(cacheBlock(v, null));
    }
  });
  return box;
}
function findingCard(f, i) {
  var card = el('div', { 'class': 'card', id: 'finding-' + (i + 1) });
  var kf = keyFrame(f.frames);
  card.appendChild(el('h3', null, ['#' + (i + 1) + ' ', el('span', { 'class': 'mono', title: frameLabel(kf), text: shorten(frameLabel(kf), 140) }),
    el('span', { 'class': 'tag cls-unbounded', text: f.kind === 'cache_growth' ? 'growing cache' : f.kind === 'duplicate_types' ? 'classes keep being created' : 'unbounded growth' })]));
  var where = kf ? [kf.file ? kf.file + (kf.line ? ':' + kf.line : '') : '', kf.module ? '[' + kf.module + ']' : ''].join('  ') : '';
  card.appendChild(el('div', { 'class': 'where mono', text: where }));
  var series = [];
  if (Array.isArray(f.retained_series) && f.retained_series.length)
    series.push({ name: 'retained bytes', color: COLORS[i % COLORS.length], fill: true, points: seriesPoints(f.retained_series) });
  var extra = findingExtra(f);
  if (extra)
    cacheSeries(extra).forEach(function (s) {
      if (s.isBytes && series.length) return;  // the finding's own retained curve is already there
      if (s.isBytes) series.push({ name: s.name, color: COLORS[i % COLORS.length], fill: true, points: s.points });
      else series.push({ name: s.name, color: '#2b6cb0', dash: '5 3', axis: 'right', points: s.points });
    });
  var grid = el('div', { 'class': 'grid' });
  grid.appendChild(el('div', null, lineChart(series, { width: 640, height: 250, label: 'finding ' + (i + 1) + ' over time', tmax: num(data.duration_s) })));
  grid.appendChild(el('div', null, [
    kvTable([
      ['retained at end', estBytes(f.retained_bytes, f.retained_bytes_stderr, f.live_samples)],
      ['live allocations', estCount(f.live_allocations)],
      ['allocations', estCount(f.allocations) + ('allocated_bytes' in f ? ' (' + bytes(f.allocated_bytes) + ')' : '')],
      ['growth rate', bytes(f.growth_bytes_per_s) + '/s'],
      ['growing since', seconds(f.started_at_s)],
      ['confidence', num(f.confidence).toFixed(2)],
      f.stack_ids ? ['stacks merged', String(f.stack_ids.length)] : null
    ]),
    el('div', { 'class': 'reason', text: 'Why: ' + (f.reason || 'classified as unbounded') })
  ]));
  card.appendChild(grid);
  card.appendChild(el('div', { 'class': 'caption', text: (f.kind === 'cache_growth' ? 'Inserting stack' : f.kind === 'duplicate_types' ? 'Creating stack' : 'Allocating stack') + ' (innermost first; Python frames in blue):' }));
  card.appendChild(stackList(f.frames));
  if (extra) card.appendChild(cacheBlock(extra, f.cache ? 'Cache' : 'Classes'));
  return card;
}
function findingsSection() {
  var box = el('section');
  var findings = data.findings || [];
  box.appendChild(el('h2', { text: 'Findings' }));
  if (!findings.length) box.appendChild(el('p', { 'class': 'muted', text: 'No group of allocations keeps growing for as long as the program works.' }));
  findings.forEach(function (f, i) { box.appendChild(findingCard(f, i)); });
  return box;
}
// Bytes a group gained from a quarter of the run to its end: what start-up tables do not have.
function growthOf(g) {
  var s = g.retained_series;
  if (!Array.isArray(s) || !s.length) return 0;
  var q = Math.floor(s.length / 4);
  return Math.max(0, num(s[s.length - 1]) - num(s[q]));
}
function flameSection() {
  var box = el('section');
  var all = [];
  // Cache and class findings hold memory that the stack groups already count.
  (data.findings || []).forEach(function (f) {
    if (!f.kind || f.kind === 'unbounded_growth') all.push({ g: f, finding: true, cls: 'unbounded' });
  });
  (data.groups || []).forEach(function (g) { all.push({ g: g, finding: false, cls: g['class'] }); });
  var retained = all.map(function (a) { return { frames: a.g.frames, value: num(a.g.retained_bytes), finding: a.finding, cls: a.cls }; });
  var known = retained.reduce(function (s, r) { return s + r.value; }, 0);
  var rest = num((data.totals || {}).retained_bytes) - known;
  if (rest > 0) retained.push({ frames: [{ function: 'other stacks (each under 64 KB, or beyond the top groups)' }], value: rest, synthetic: true });
  box.appendChild(el('h2', { text: 'Retained memory at the end, by stack' }));
  box.appendChild(el('div', { 'class': 'caption', text: 'Icicle graph: the outermost frame on top, width = bytes still allocated when the trace ended. Red: stacks of findings.' }));
  box.appendChild(flameGraph(retained, { what: 'retained', label: 'retained memory flame graph', empty: 'nothing was retained at the end' }));
  box.appendChild(el('h2', { text: 'Growth over the run, by stack' }));
  box.appendChild(el('div', { 'class': 'caption', text: 'Width = bytes a stack gained from a quarter into the run to its end (memory loaded at start-up and then kept does not count).' }));
  box.appendChild(flameGraph(all.map(function (a) { return { frames: a.g.frames, value: growthOf(a.g), finding: a.finding, cls: a.cls }; }),
                             { what: 'growth', label: 'growth flame graph', empty: 'no stack grew after the first quarter of the run' }));
  return box;
}
var CLASS_WHY = {
  bounded: 'grew, then stopped: a cache with a limit or a table built once',
  transient: 'came and went: the memory was given back',
  stable: 'too small or too short-lived to show a trend',
  undetermined: 'too thinly sampled to judge'
};
function sparkline(values) {
  var W = 140, H = 28, pts = seriesPoints(values);
  var g = svg('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
  if (pts.length < 2) return g;
  var tmax = Math.max(num(data.duration_s), pts[pts.length - 1][0]) || 1, vmax = 0;
  pts.forEach(function (p) { vmax = Math.max(vmax, p[1]); });
  vmax = vmax || 1;
  var d = '';
  pts.forEach(function (p, i) { d += (i ? 'L' : 'M') + (1 + p[0] / tmax * (W - 2)).toFixed(1) + ',' + (H - 2 - p[1] / vmax * (H - 4)).toFixed(1); });
  g.appendChild(svg('path', { d: d, fill: 'none', stroke: '#1565c0', 'stroke-width': 1.5 }));
  return g;
}
function groupsSection() {
  var box = el('section');
  var groups = data.groups || [];
  box.appendChild(el('h2', { text: 'Considered and not findings' }));
  box.appendChild(el('div', { 'class': 'caption', text: 'The largest other stacks that held at least 64 KB at some point, and why each is not unbounded growth.' }));
  if (!groups.length) { box.appendChild(el('p', { 'class': 'muted', text: 'None.' })); return box; }
  var table = el('table', { 'class': 'list' });
  table.appendChild(el('tr', null, ['class', 'allocated at', 'over time', 'retained / peak', 'why not a finding'].map(function (h) { return el('th', { text: h }); })));
  groups.forEach(function (g) {
    var cls = g['class'] || 'stable';
    var kf = keyFrame(g.frames);
    var why = (CLASS_WHY[cls] || cls) + (g.reason ? ' \u2014 ' + g.reason : '') +
              (cls === 'bounded' && g.plateau_at_s ? ' (plateau at ' + seconds(g.plateau_at_s) + ')' : '');
    table.appendChild(el('tr', null, [
      el('td', null, el('span', { 'class': 'tag cls-' + cls, text: cls })),
      el('td', { 'class': 'mono' }, [el('span', { 'class': 'fn', title: frameLabel(kf), text: shorten(frameLabel(kf), 90) }), el('br'),
                                     el('span', { 'class': 'muted', text: frameWhere(kf) + (kf && kf.module ? '  [' + kf.module + ']' : '') })]),
      el('td', null, sparkline(g.retained_series)),
      el('td', { text: estBytes(g.retained_bytes, g.retained_bytes_stderr, g.live_samples) + ' / ' + bytes(g.peak_bytes) }),
      el('td', { text: why })
    ]));
  });
  box.appendChild(table);
  return box;
}
function namedSection(title, caption, items, columns) {
  if (!Array.isArray(items) || !items.length) return null;
  var box = el('section');
  box.appendChild(el('h3', { text: title, style: 'margin-top:18px' }));
  box.appendChild(el('div', { 'class': 'caption', text: caption }));
  var table = el('table', { 'class': 'list' });
  table.appendChild(el('tr', null, columns.map(function (c) { return el('th', { text: c[0] }); })));
  items.forEach(function (it) {
    table.appendChild(el('tr', null, columns.map(function (c) { return el('td', { 'class': c[2] || '', text: c[1](it) }); })));
  });
  box.appendChild(table);
  return box;
}
function cachesSection() {
  return namedSection('Caches that are not findings', 'functools caches filled during the run that stop growing.', data.caches, [
    ['cache', function (c) { return c.name || c.wrapped || '?'; }, 'mono'],
    ['created at', function (c) { return c.location || ''; }, 'mono'],
    ['entries', function (c) { return count(c.entries_last) + (c.maxsize === null || c.maxsize === undefined ? ' (no limit)' : ' of max ' + count(c.maxsize)); }],
    ['retained', function (c) { return estBytes(c.retained_bytes, c.retained_bytes_stderr, c.retained_samples); }],
    ['why not a finding', function (c) { return c.reason || ''; }]
  ]);
}
function typesSection() {
  return namedSection('Classes created many times, not findings', 'Class names created repeatedly whose classes do not pile up.', data.types, [
    ['class', function (t) { return t.name || '?'; }, 'mono'],
    ['created', function (t) { return count(t.created); }],
    ['alive at end', function (t) { return count(t.live_at_end); }],
    ['why not a finding', function (t) { return t.reason || ''; }]
  ]);
}
function childrenSection() {
  var ch = data.children || [];
  if (!ch.length) return null;
  var box = el('section');
  box.appendChild(el('h2', { text: 'Child traces' }));
  box.appendChild(el('ul', { 'class': 'mono' }, ch.map(function (c) {
    return el('li', { text: c.kind + (c.kind === 'fork' ? ' pid ' + c.pid : '') + ': ' + c.path });
  })));
  return box;
}

append(root, [header(), memorySection(), findingsSection(), flameSection(), groupsSection(), cachesSection(), typesSection(), childrenSection(),
              el('p', { 'class': 'caption', text: 'growtrace report, JSON schema v' + data.format_version +
                                                  '; the data is embedded in this file (script#growtrace-data).' })]);
var noscript = root.querySelector('noscript');
if (noscript) noscript.remove();
document.body.setAttribute('data-rendered', 'true');
})();
</script>
</body>
</html>
)GTHTML";

}  // namespace growtrace
