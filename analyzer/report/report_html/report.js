(function () {
'use strict';
var early = window.__gtEarlyErrors || [];
for (var i = 0; i < early.length; i++) window.onerror(early[i], '', 0, 0);

var SVGNS = 'http://www.w3.org/2000/svg';
var data = JSON.parse(document.getElementById('growtrace-data').textContent);
var root = document.getElementById('gt-report');
var COLORS = ['#c62828', '#ef6c00', '#6d4c41', '#ad1457', '#00838f', '#558b2f', '#4527a0', '#f9a825'];
var F = window.growtraceFormat;
var num = F.num, bytes = F.bytes, seconds = F.seconds, count = F.count, shorten = F.shorten;
var frameLabel = F.frameLabel, frameWhere = F.frameWhere, isPython = F.isPython, keyFrame = F.keyFrame;
function sampled() { return F.isSampled(data); }
function estBytes(b, se, n) { return F.estBytes(data, b, se, n); }
function timeline() { return Array.isArray(data.timeline) ? data.timeline : []; }
function seriesPoints(values) { return F.seriesPoints(values, timeline()); }

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
// ---- line charts ---------------------------------------------------------------------------
// series: [{name, unit ('bytes', 'entries', 'classes'), color, points: [[t, v]...], dash, fill}].
// The first unit gets the left axis and a second the right; each axis names its unit.
function lineChart(series, opts) {
  opts = opts || {};
  var W = opts.width || 1000, H = opts.height || 260;
  var units = F.assignAxes(series);
  var hasRight = !!units.right && series.some(function (s) { return s.axis === 'right' && s.points.length; });
  var M = { l: 74, r: hasRight ? 74 : 18, t: 24, b: 44 };
  var pw = W - M.l - M.r, ph = H - M.t - M.b;
  var tmax = 0;
  series.forEach(function (s) { s.points.forEach(function (p) { tmax = Math.max(tmax, p[0]); }); });
  if (opts.tmax) tmax = Math.max(tmax, opts.tmax);
  if (!(tmax > 0)) tmax = 1;
  function axisMax(axis) {
    var m = 0;
    series.forEach(function (s) { if (s.axis === axis) s.points.forEach(function (p) { m = Math.max(m, p[1]); }); });
    return m;
  }
  var ticks = { left: F.axisTicks(axisMax('left'), units.left), right: hasRight ? F.axisTicks(axisMax('right'), units.right) : [0, 1] };
  var ymax = { left: ticks.left[ticks.left.length - 1], right: ticks.right[ticks.right.length - 1] };
  function X(t) { return M.l + (t / tmax) * pw; }
  function Y(v, axis) { return M.t + ph - (v / ymax[axis || 'left']) * ph; }
  var g = svg('svg', { 'class': 'chart', viewBox: '0 0 ' + W + ' ' + (H + 22), role: 'img',
                       'aria-label': opts.label || 'chart' });
  g.appendChild(svg('rect', { x: M.l, y: M.t, width: pw, height: ph, fill: '#fbfcfe', stroke: '#d9dee7' }));
  function yAxis(axis) {
    var labels = F.tickLabels(ticks[axis], units[axis]), left = axis === 'left';
    ticks[axis].forEach(function (v, k) {
      if (left) g.appendChild(svg('line', { x1: M.l, x2: M.l + pw, y1: Y(v), y2: Y(v), stroke: '#e6e9ef' }));
      g.appendChild(svg('text', { x: left ? M.l - 6 : M.l + pw + 6, y: Y(v, axis) + 4, 'text-anchor': left ? 'end' : 'start',
                                  'font-size': 11, fill: '#5d6677', 'class': 'tick y-' + axis, text: labels[k] }));
    });
    g.appendChild(svg('text', { x: left ? M.l - 6 : M.l + pw + 6, y: M.t - 9, 'text-anchor': left ? 'end' : 'start',
                                'font-size': 11, 'font-weight': 600, fill: '#5d6677', 'class': 'axis-unit axis-' + axis,
                                text: F.UNIT_NAMES[units[axis]] || units[axis] }));
  }
  yAxis('left');
  if (hasRight) yAxis('right');
  var tstep = F.niceStep(tmax, 8);
  for (var t = 0; t <= tmax + 1e-9; t += tstep) {
    g.appendChild(svg('line', { x1: X(t), x2: X(t), y1: M.t + ph, y2: M.t + ph + 4, stroke: '#8a93a3' }));
    g.appendChild(svg('text', { x: X(t), y: M.t + ph + 17, 'text-anchor': 'middle', 'font-size': 11, fill: '#5d6677', 'class': 'tick x', text: seconds(t) }));
  }
  g.appendChild(svg('text', { x: M.l + pw / 2, y: M.t + ph + 34, 'text-anchor': 'middle', 'font-size': 11, fill: '#5d6677', text: 'time since process start' }));
  var lx = M.l, ly = H + 8;
  series.forEach(function (s) {
    if (!s.points.length) return;
    var d = '';
    s.points.forEach(function (p, i) { d += (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ',' + Y(p[1], s.axis).toFixed(1); });
    if (s.fill) {
      var last = s.points[s.points.length - 1], first = s.points[0];
      g.appendChild(svg('path', { d: d + 'L' + X(last[0]).toFixed(1) + ',' + Y(0, s.axis) + 'L' + X(first[0]).toFixed(1) + ',' + Y(0, s.axis) + 'Z',
                                  fill: s.color, 'fill-opacity': 0.12, stroke: 'none' }));
    }
    g.appendChild(svg('path', { d: d, fill: 'none', stroke: s.color, 'stroke-width': s.width || 2,
                                'stroke-dasharray': s.dash || null, 'stroke-linejoin': 'round', 'class': 'series' },
                      svg('title', { text: s.name })));
    var label = s.name + (s.axis === 'right' ? ' (right axis)' : '');
    var lw = 34 + label.length * 6.4;
    if (lx > M.l && lx + lw > W) { lx = M.l; ly += 18; }  // next legend row
    g.appendChild(svg('rect', { x: lx, y: ly, width: 14, height: 4, fill: s.color }));
    g.appendChild(svg('text', { x: lx + 19, y: ly + 6, 'font-size': 11.5, fill: '#1d2330', 'class': 'legend', text: label }));
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
// A numbered stack, innermost frame first. The numbers are text in a column as wide as the
// largest of them, so none is cut.
function stackList(frames, max) {
  frames = frames || [];
  max = max || 40;
  var shown = frames.slice(0, max), numbers = F.numberLabels(shown.length);
  var ol = el('ol', { 'class': 'stack mono', style: '--num-width:' + F.numberWidthCh(shown.length) + 'ch' });
  shown.forEach(function (f, k) {
    var where = f.file ? f.file + (f.line ? ':' + f.line : '') : '';
    ol.appendChild(el('li', null, [
      el('span', { 'class': 'n', text: numbers[k] }),
      el('span', { 'class': 'frame' }, [
        el('span', { 'class': 'fn' + (isPython(f) ? ' py' : '') + (F.isUnnamed(f) ? ' unnamed' : ''), text: frameLabel(f) }),
        isPython(f) ? el('span', { 'class': 'tag py', text: 'py' }) : (f.module && !F.isUnnamed(f) ? el('span', { 'class': 'tag', text: f.module }) : null),
        where ? el('span', { 'class': 'loc', text: '  ' + where }) : null
      ])
    ]));
  });
  if (frames.length > max) ol.appendChild(el('li', { 'class': 'muted', text: '\u2026 ' + (frames.length - max) + ' more frames' }));
  if (!frames.length) ol.appendChild(el('li', { 'class': 'muted', text: 'no stack' }));
  return ol;
}
function header() {
  var t = data.totals || {};
  var box = el('section');
  box.appendChild(el('h1', { text: 'growtrace report' }));
  box.appendChild(el('div', { 'class': 'mono', text: data.command || '(unknown command)' }));
  var bad = (data.findings || []).length > 0;
  box.appendChild(el('div', { 'class': 'verdict ' + (bad ? 'bad' : 'good'), text: F.verdictText(data) }));
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
function estCount(n) { return F.estCount(data, n); }
// The findings the memory chart draws: the root causes' findings first, then the others.
function leadingFindings() {
  var order = F.organize(data), out = [];
  order.roots.forEach(function (r) { if (r.root) out.push(r.root); });
  return out.concat(order.rest);
}
function memorySection() {
  var tl = timeline();
  var box = el('section');
  box.appendChild(el('h2', { text: 'Memory over time' }));
  var series = [{ name: 'traced heap (retained)', unit: 'bytes', color: '#1565c0', fill: true,
                  points: seriesPoints(tl.map(function (p) { return p.heap_bytes; })) }];
  var rss = tl.filter(function (p) { return num(p.rss_bytes) > 0; });
  if (rss.length) series.push({ name: 'RSS (time marks)', unit: 'bytes', color: '#8e24aa', dash: '6 4',
                                points: rss.map(function (p) { return [num(p.t), num(p.rss_bytes)]; }) });
  // Only curves in bytes share this chart: class counts have their findings' own charts.
  var drawn = 0;
  leadingFindings().forEach(function (e) {
    if (drawn >= COLORS.length) return;
    var held = F.findingSeries(e.finding, tl).filter(function (c) { return c.unit === 'bytes'; })[0];
    if (!held) return;
    series.push({ name: '#' + e.id + ' ' + shorten(F.findingTitle(e.finding), 48), unit: 'bytes', color: COLORS[drawn], width: 1.5, points: held.points });
    drawn++;
  });
  box.appendChild(lineChart(series, { height: 280, label: 'memory over time', tmax: num(data.duration_s) }));
  box.appendChild(el('div', { 'class': 'caption',
    text: 'Traced heap: bytes allocated and not yet freed at the end of each ' + seconds(data.window_s) +
          ' window. RSS: resident set size sampled by the tracer\u2019s time marks' + (rss.length ? '' : ' (none in this trace)') +
          '. Thin lines: the findings below.' }));
  return box;
}
function cacheDetails(cache) {
  var box = el('div', { 'class': 'details' });
  box.appendChild(el('h4', { text: 'Cache' }));
  box.appendChild(kvTable([
    ['name', cache.name || '?'],
    cache.wrapped ? ['wraps', cache.wrapped] : null,
    Array.isArray(cache.bound_names) && cache.bound_names.length ? ['bound to', cache.bound_names.join(', ')] : null,
    cache.location ? ['created at', cache.location] : null,
    ['maxsize', cache.maxsize === null || cache.maxsize === undefined ? 'none (never evicts)' : count(cache.maxsize)],
    ['retained', estBytes(cache.retained_bytes, cache.retained_bytes_stderr, cache.retained_samples)],
    cache.reason ? ['verdict', cache.reason] : null
  ]));
  var keys = Array.isArray(cache.key_types) ? cache.key_types : [];
  if (keys.length) {
    box.appendChild(el('div', { 'class': 'caption', text: 'Classes of its keys' }));
    var table = el('table', { 'class': 'list' });
    table.appendChild(el('tr', null, ['class', 'distinct classes', 'alive'].map(function (h) { return el('th', { text: h }); })));
    keys.slice(0, 20).forEach(function (k) {
      table.appendChild(el('tr', null, [el('td', { 'class': 'mono', text: k.name || '?' }),
                                        el('td', { text: count(k.distinct_classes) }), el('td', { text: count(k.live_classes) })]));
    });
    box.appendChild(table);
  }
  if (Array.isArray(cache.example_keys) && cache.example_keys.length) {
    box.appendChild(el('div', { 'class': 'caption', text: 'Example keys' }));
    box.appendChild(el('ul', { 'class': 'mono keys' }, cache.example_keys.slice(0, 20).map(function (k) { return el('li', { text: String(k) }); })));
  }
  return box;
}
function containerDetails(c) {
  var box = el('div', { 'class': 'details' });
  box.appendChild(el('h4', { text: 'Container' }));
  var types = function (names) { return Array.isArray(names) && names.length ? names.join(', ') : null; };
  box.appendChild(kvTable([
    ['name', c.name || '?'],
    ['kind', c.kind || '?'],
    c.owner_type ? ['held by', c.owner_type] : null,
    ['found', c.reached_from_module ? 'by its path from a module' : 'in the heap, named by its owner'],
    ['entries', count(c.entries_first) + ' \u2192 ' + count(c.entries_last) + ' over ' + F.plural(c.walks, 'walk', 'walks')],
    types(c.key_types) ? ['newest keys', types(c.key_types)] : null,
    types(c.value_types) ? ['newest values', types(c.value_types)] : null,
    ['its entries\u2019 stacks hold', bytes(c.retained_bytes)],
    c.reason ? ['verdict', c.reason] : null
  ]));
  return box;
}
function typeDetails(type) {
  var box = el('div', { 'class': 'details' });
  box.appendChild(el('h4', { text: 'Classes' }));
  box.appendChild(kvTable([
    ['name', type.name || '?'],
    ['created', count(type.created) + ', ' + F.perSecond(type.created_per_s, 'classes') + ' from ' + seconds(type.started_at_s)],
    ['alive at end', count(type.live_at_end)],
    type.reason ? ['verdict', type.reason] : null
  ]));
  return box;
}
function findingChart(f, color, label) {
  var series = F.findingSeries(f, timeline());
  var colors = [color, '#2b6cb0', '#6d4c41'];
  series.forEach(function (s, k) {
    s.color = colors[k % colors.length];
    if (k === 0) s.fill = true; else s.dash = '5 3';
  });
  return lineChart(series, { width: 640, height: 250, label: label, tmax: num(data.duration_s) });
}
// One finding: what grows (its title), its curve and figures, why it is one, its stacks once.
function findingCard(f, id, relation) {
  var card = el('div', { 'class': 'card finding kind-' + (f.kind || 'unbounded_growth'), id: 'finding-' + id });
  var title = F.findingTitle(f);
  card.appendChild(el('h3', null, ['#' + id + ' ', el('span', { 'class': 'mono title', title: title, text: shorten(title, 140) }),
    el('span', { 'class': 'tag cls-unbounded', text: F.kindLabel(f.kind) }),
    relation ? el('span', { 'class': 'tag', text: F.relationLabel(relation) }) : null]));
  var kf = keyFrame(f.frames);
  var where = kf ? [kf.file ? kf.file + (kf.line ? ':' + kf.line : '') : '', kf.module ? '[' + kf.module + ']' : ''].join('  ') : '';
  if (f.kind === 'cache_growth' && f.cache && f.cache.location) where = f.cache.location;
  if (f.kind === 'container_growth' && f.container && !where.trim()) where = 'held by ' + (f.container.owner_type || '?');
  card.appendChild(el('div', { 'class': 'where mono', text: where }));
  var grid = el('div', { 'class': 'grid' });
  grid.appendChild(el('div', null, findingChart(f, COLORS[(id - 1) % COLORS.length], 'finding ' + id + ' over time')));
  grid.appendChild(el('div', null, [
    kvTable(F.findingFigures(f, data)),
    el('div', { 'class': 'reason', text: 'Why: ' + (f.reason || 'classified as unbounded') })
  ]));
  card.appendChild(grid);
  F.findingStacks(f).forEach(function (st) {
    card.appendChild(el('div', { 'class': 'caption', text: st.caption + ' (innermost first; Python frames in blue):' }));
    card.appendChild(stackList(st.frames));
  });
  if (f.kind === 'cache_growth' && f.cache) card.appendChild(cacheDetails(f.cache));
  if (f.kind === 'container_growth' && f.container) card.appendChild(containerDetails(f.container));
  if (f.kind === 'duplicate_types' && f.type) card.appendChild(typeDetails(f.type));
  return card;
}
// A root cause: its title, what happened, what to do, its figures and curve, and the findings
// that are its evidence folded under it.
function rootCauseCard(r) {
  var rc = r.cause, f = r.root ? r.root.finding : null;
  var card = el('div', { 'class': 'card root-cause', id: 'root-cause-' + r.id });
  card.appendChild(el('h3', null, ['Root cause ' + r.id + ': ', el('span', { 'class': 'title', text: rc.title || (f ? F.findingTitle(f) : '?') }),
    el('span', { 'class': 'tag cls-unbounded', text: F.kindLabel(rc.kind || (f && f.kind)) })]));
  if (rc.summary) card.appendChild(el('div', { 'class': 'summary', text: rc.summary }));
  if (rc.remedy) card.appendChild(el('div', { 'class': 'remedy' }, [el('b', { text: 'Remedy: ' }), rc.remedy]));
  var grid = el('div', { 'class': 'grid' });
  grid.appendChild(el('div', null, f ? findingChart(f, COLORS[(r.id - 1) % COLORS.length], 'root cause ' + r.id + ' over time') : null));
  var held = r.evidence.reduce(function (a, e) { return a + num(e.finding.retained_bytes); }, 0);
  grid.appendChild(el('div', null, kvTable([
    ['retained at end', bytes(rc.retained_bytes)],
    ['growth rate', F.perSecond(rc.growth_bytes_per_s, 'bytes')],
    r.root ? ['root finding', '#' + r.root.id + ' ' + F.findingTitle(r.root.finding)] : null,
    ['evidence', F.plural(r.evidence.length, 'finding', 'findings') + (held > 0 ? ' (' + bytes(held) + ' in their stacks)' : '')]
  ])));
  card.appendChild(grid);
  var details = el('details', { 'class': 'evidence' });
  details.appendChild(el('summary', { text: 'Findings of this root cause: ' + (r.root ? '#' + r.root.id + ' and ' : '') +
                                            F.plural(r.evidence.length, 'finding', 'findings') + ' of evidence' }));
  if (r.root) details.appendChild(findingCard(r.root.finding, r.root.id, null));
  F.evidenceGroups(r.evidence).forEach(function (grp) {
    details.appendChild(el('h4', { text: 'Evidence: ' + grp.label + ' (' + grp.items.length + ')' }));
    grp.items.forEach(function (e) { details.appendChild(findingCard(e.finding, e.id, grp.relation)); });
  });
  card.appendChild(details);
  return card;
}
function rootCausesSection(order) {
  if (!order.roots.length) return null;
  var box = el('section', { id: 'root-causes' });
  box.appendChild(el('h2', { text: order.roots.length === 1 ? 'Root cause' : 'Root causes' }));
  box.appendChild(el('div', { 'class': 'caption', text: 'Each cause of growth once, with the findings that are its evidence folded under it (click to open).' }));
  order.roots.forEach(function (r) { box.appendChild(rootCauseCard(r)); });
  return box;
}
function findingsSection(order) {
  var box = el('section', { id: 'findings' });
  var rest = order.rest;
  if (order.roots.length && !rest.length) return null;
  box.appendChild(el('h2', { text: order.roots.length ? 'Other findings' : 'Findings' }));
  if (!rest.length) box.appendChild(el('p', { 'class': 'muted', text: 'No group of allocations keeps growing for as long as the program works.' }));
  rest.forEach(function (e) { box.appendChild(findingCard(e.finding, e.id, null)); });
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
  undetermined: 'too thinly sampled to judge',
  unbounded: 'grows without bound, too slowly and too small a part of the heap\u2019s growth to act on'
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
    var why = (CLASS_WHY[cls] || cls) + (g.significance ? ' \u2014 ' + g.significance : g.reason ? ' \u2014 ' + g.reason : '') +
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
function containersSection() {
  return namedSection('Containers that are not findings', 'Dicts, lists, sets and deques the walks measured that stop growing.', data.containers, [
    ['container', function (c) { return c.name || '?'; }, 'mono'],
    ['kind', function (c) { return c.kind || ''; }],
    ['entries', function (c) { return count(c.entries_first) + ' \u2192 ' + count(c.entries_last); }],
    ['walks', function (c) { return count(c.walks); }],
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

var order = F.organize(data);
append(root, [header(), rootCausesSection(order), memorySection(), findingsSection(order), flameSection(), groupsSection(), cachesSection(), containersSection(), typesSection(), childrenSection(),
              el('p', { 'class': 'caption', text: 'growtrace report, JSON schema v' + data.format_version +
                                                  '; the data is embedded in this file (script#growtrace-data).' })]);
var noscript = root.querySelector('noscript');
if (noscript) noscript.remove();
document.body.setAttribute('data-rendered', 'true');
})();
