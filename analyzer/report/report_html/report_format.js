// The HTML report's pure functions: formatting of figures and axes, titles of findings, the
// stacks a finding shows, and the order of the page (root causes with their evidence, then the
// rest). No DOM here: report.js draws with these, and tests/js/ runs them under node.
// One script of its own in the page, where its functions and `growtraceFormat` are the page's;
// a module under node (tests/js/).
'use strict';

function num(x) { var n = Number(x); return isFinite(n) ? n : 0; }

// ---- figures -------------------------------------------------------------------------------
var BYTE_UNITS = ['B', 'KB', 'MB', 'GB', 'TB'];
// Decimal units, as the text report and top use.
function bytes(b) {
  b = num(b);
  var u = 0, neg = b < 0;
  b = Math.abs(b);
  while (b >= 1000 && u < 4) { b /= 1000; u++; }
  var s = u === 0 ? Math.round(b) + ' B' : b.toFixed(b < 10 ? 2 : 1) + ' ' + BYTE_UNITS[u];
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
// "3 classes", "1 class": a count with its noun, singular for one.
function plural(n, one, many) { return count(n) + ' ' + (num(n) === 1 ? one : many); }
// A rate per second: few digits, but never rounded to zero when it is not.
function perSecond(v, unit) {
  v = num(v);
  if (unit === 'bytes') return bytes(v) + '/s';
  var a = Math.abs(v);
  var s = a === 0 ? '0' : a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 0.1 ? v.toFixed(2) : v.toPrecision(2);
  return s + ' ' + unit + '/s';
}
function shorten(text, max) { text = String(text); return text.length > max ? text.slice(0, max - 1) + '\u2026' : text; }
function basename(p) { p = String(p || ''); var i = p.lastIndexOf('/'); return i < 0 ? p : p.slice(i + 1); }

// ---- axes ----------------------------------------------------------------------------------
// The units a chart's series come in; the axis shows the name, bytes also on each tick.
var UNIT_NAMES = { bytes: 'bytes', entries: 'entries', classes: 'classes', allocations: 'allocations' };
function niceStep(range, ticks, whole) {
  if (!(range > 0)) return 1;
  var raw = range / ticks, mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
  // Whole units (entries, classes) never step by 2.5 under 10, nor by less than 1.
  var steps = whole && mag < 10 ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
  for (var i = 0; i < steps.length; i++) if (r <= steps[i] + 1e-9) return Math.max(steps[i] * mag, whole ? 1 : 0);
  return 10 * mag;
}
// The ticks of an axis from 0 to at least `max`, about five, at round values of the unit.
function axisTicks(max, unit) {
  max = num(max);
  if (!(max > 0)) max = unit === 'bytes' ? 1000 : 1;
  // Bytes, entries and classes all come in whole units.
  var step = niceStep(max, 5, true), top = Math.ceil(max / step - 1e-9) * step, ticks = [];
  for (var i = 0; i * step <= top + step * 1e-9; i++) ticks.push(i * step);
  if (ticks.length < 2) ticks.push(step);
  return ticks;
}
// Labels of an axis's ticks: bytes all in the unit of the largest tick, with as many decimals
// as the step needs (so no two ticks read the same); counts as whole numbers, with k or M
// past ten thousand.
function tickLabels(ticks, unit) {
  var top = ticks.length ? ticks[ticks.length - 1] : 0;
  var step = ticks.length > 1 ? ticks[1] - ticks[0] : top || 1;
  if (unit === 'bytes') {
    var u = 0, scale = 1;
    while (top / scale >= 1000 && u < BYTE_UNITS.length - 1) { scale *= 1000; u++; }
    var digits = decimalsFor(step / scale);
    return ticks.map(function (t) { return (t / scale).toFixed(digits) + ' ' + BYTE_UNITS[u]; });
  }
  var div = top >= 1e7 ? 1e6 : top >= 1e4 ? 1e3 : 1, suffix = div === 1e6 ? 'M' : div === 1e3 ? 'k' : '';
  var d = decimalsFor(step / div);
  return ticks.map(function (t) { return div === 1 || t === 0 ? count(t) : (t / div).toFixed(d) + suffix; });
}
function decimalsFor(step) {
  for (var d = 0; d < 3; d++) {
    var scaled = step * Math.pow(10, d);
    if (Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, scaled)) return d;
  }
  return 3;
}
// The axes of a chart: the first series' unit on the left, a second unit on the right.
function assignAxes(series) {
  var units = [];
  series.forEach(function (s) {
    var u = s.unit || 'bytes';
    if (units.indexOf(u) < 0 && units.length < 2) units.push(u);
    s.axis = units.indexOf(u) === 1 ? 'right' : 'left';
  });
  return { left: units[0] || 'bytes', right: units[1] || null };
}

// ---- frames and titles ---------------------------------------------------------------------
function isUnnamed(f) { return !f || !f.function || f.function === '??'; }
function isPython(f) { return !!f && f.module === 'python'; }
// A frame's name; a frame without a symbol is named after the module its code is in.
function frameLabel(f) {
  if (!f) return '(no stack)';
  if (!isUnnamed(f)) return f.function;
  return 'unnamed function in ' + (f.module || 'an unknown module');
}
function frameWhere(f) {
  if (!f || !f.file) return '';
  return basename(f.file) + (f.line ? ':' + f.line : '');
}
// The frame that names a group: the innermost that is not an allocator entry point, library
// internals, the interpreter's own machinery under Python code, or a frame without a name.
var ALLOCATOR = /^(operator new|operator new\[\]|malloc|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|PyMem_|PyObject_Malloc|PyObject_Calloc|PyObject_Realloc|_PyObject_|__libc_|std::__new_allocator|__gnu_cxx::new_allocator|std::allocator)/;
var LIBRARY = /^(std::|__gnu_cxx::|__cxx|void std::|.*\bstd::.*::(allocate|_M_allocate|construct)\b)/;
var INTERPRETER = /^(libpython|python\d)/;
function keyFrame(frames) {
  frames = frames || [];
  var python = frames.some(isPython);
  var passes = [
    function (f) { return !isUnnamed(f) && !LIBRARY.test(f.function) && !/^\/usr\/include\//.test(f.file || '') &&
                          !(python && INTERPRETER.test(f.module || '')); },
    function (f) { return !isUnnamed(f); },
    function () { return true; }
  ];
  for (var pass = 0; pass < passes.length; pass++) {
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (ALLOCATOR.test(f.function || '') || (f.module || '') === 'libgrowtrace.so') continue;
      if (passes[pass](f)) return f;
    }
  }
  return frames[0];
}
// The kind-specific object of a finding: `cache` (cache_growth), `type` (duplicate_types),
// `container` (container_growth).
function findingExtra(f) {
  var x = f && (f.cache || f.type || f.container);
  return x && typeof x === 'object' && !Array.isArray(x) ? x : null;
}
// A finding is named by what grows: the cache, the container, the class, or the function that
// allocates.
function findingTitle(f) {
  if (f.kind === 'cache_growth' && f.cache && (f.cache.name || f.cache.wrapped)) return f.cache.name || f.cache.wrapped;
  if (f.kind === 'container_growth' && f.container && f.container.name) return f.container.name;
  if (f.kind === 'duplicate_types' && f.type && f.type.name) return f.type.name;
  var k = keyFrame(f.frames);
  if (!k) return '(no stack)';
  var w = frameWhere(k);
  return frameLabel(k) + (w ? ' (' + w + ')' : '');
}
var KIND_LABELS = { cache_growth: 'growing cache', container_growth: 'growing container', duplicate_types: 'classes keep being created',
                    unbounded_growth: 'unbounded growth' };
function kindLabel(kind) { return KIND_LABELS[kind] || KIND_LABELS.unbounded_growth; }
function stackCaption(kind) {
  return kind === 'cache_growth' || kind === 'container_growth' ? 'Inserting stack'
       : kind === 'duplicate_types' ? 'Creating stack' : 'Allocating stack';
}

// ---- stacks --------------------------------------------------------------------------------
function sameFrame(a, b) {
  return a.function === b.function && (a.file || '') === (b.file || '') && num(a.line) === num(b.line) &&
         (a.module || '') === (b.module || '') && (!isUnnamed(a) || num(a.ip) === num(b.ip));
}
function sameStack(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (var i = 0; i < a.length; i++) if (!sameFrame(a[i], b[i])) return false;
  return true;
}
function isFrameList(v) { return Array.isArray(v) && v.length > 0 && typeof v[0] === 'object' && v[0] !== null && 'function' in v[0]; }
// The stacks a finding shows, each once: its own, then any other of its cache or class object
// (a cache's inserted_from and a class's created_from repeat the finding's frames).
function findingStacks(f) {
  var out = [];
  function add(caption, frames) {
    if (!isFrameList(frames)) return;
    for (var i = 0; i < out.length; i++) if (sameStack(out[i].frames, frames)) return;
    out.push({ caption: caption, frames: frames });
  }
  add(stackCaption(f.kind), f.frames);
  var extra = findingExtra(f);
  if (extra) Object.keys(extra).forEach(function (k) { add(k.replace(/_/g, ' '), extra[k]); });
  return out;
}
// The labels of a numbered list of n items ("1." to "n."), and the width they all fit in.
function numberLabels(n) {
  var out = [];
  for (var i = 1; i <= n; i++) out.push(i + '.');
  return out;
}
function numberWidthCh(n) { return String(Math.max(1, n)).length + 1; }

// ---- a finding's figures and curves --------------------------------------------------------
// Sampled traces' sizes and counts are estimates (JSON sampling.mean_bytes > 0).
function isSampled(data) { return num(((data || {}).sampling || {}).mean_bytes) > 0; }
function estBytes(data, b, se, n) {
  if (!isSampled(data)) return bytes(b);
  return bytes(b) + ' \u00b1 ' + bytes(se) + (n === undefined ? '' : ' (' + plural(n, 'sample', 'samples') + ')');
}
function estCount(data, n) { return (isSampled(data) ? '\u2248 ' : '') + count(n); }
// [label, text] rows of what a finding measured, by kind: a cache's or a container's entries, a
// class's creations and live count, a stack's bytes.
function findingFigures(f, data) {
  var rows = [];
  var cache = f.kind === 'cache_growth' ? f.cache || {} : null;
  var container = f.kind === 'container_growth' ? f.container || {} : null;
  var type = f.kind === 'duplicate_types' ? f.type || {} : null;
  if (cache) {
    rows.push(['entries', count(cache.entries_first) + ' \u2192 ' + count(cache.entries_last) +
               (cache.maxsize === null || cache.maxsize === undefined ? ' (no maxsize)' : ' (maxsize ' + count(cache.maxsize) + ')')]);
    rows.push(['entries added', perSecond(cache.growth_entries_per_s, 'entries')]);
    rows.push(['insertions', count(cache.insertions)]);
  }
  if (container) {
    rows.push(['entries', count(container.entries_first) + ' \u2192 ' + count(container.entries_last) +
               ' (' + plural(container.walks, 'walk', 'walks') + ')']);
    rows.push(['entries added', perSecond(container.growth_entries_per_s, 'entries')]);
  }
  if (type) {
    rows.push(['classes created', count(type.created)]);
    rows.push(['alive at end', count(type.live_at_end)]);
    rows.push(['creation rate', perSecond(type.created_per_s, 'classes')]);
  } else {
    rows.push(['retained at end', estBytes(data, f.retained_bytes, f.retained_bytes_stderr, f.live_samples)]);
    if (!container) rows.push(['live allocations', estCount(data, f.live_allocations)]);
    if (!cache && !container) rows.push(['allocations', estCount(data, f.allocations) + ('allocated_bytes' in f ? ' (' + bytes(f.allocated_bytes) + ')' : '')]);
    rows.push(['growth rate', perSecond(f.growth_bytes_per_s, 'bytes')]);
  }
  rows.push(['growing since', seconds(f.started_at_s)]);
  rows.push(['confidence', num(f.confidence).toFixed(2)]);
  if (Array.isArray(f.stack_ids)) rows.push(['stacks merged', String(f.stack_ids.length)]);
  return rows;
}
// Points [t, v] of a series given per timeline window, starting at 0 if the first is later.
function seriesPoints(values, timeline) {
  var pts = [];
  if (!Array.isArray(values) || !Array.isArray(timeline)) return pts;
  for (var i = 0; i < values.length && i < timeline.length; i++) pts.push([num(timeline[i].t), num(values[i])]);
  if (pts.length && pts[0][0] > 0) pts.unshift([0, 0]);
  return pts;
}
function pairPoints(v) {
  return Array.isArray(v) ? v.filter(Array.isArray).map(function (p) { return [num(p[0]), num(p[1])]; }) : [];
}
// The curves of a finding, each with its unit: bytes retained, a cache's entries, live classes.
function findingSeries(f, timeline) {
  var out = [];
  var held = seriesPoints(f.retained_series, timeline);
  if (!held.length && f.cache) held = pairPoints(f.cache.retained_over_time);
  if (held.length) out.push({ name: 'retained bytes', unit: 'bytes', points: held });
  if (f.cache && Array.isArray(f.cache.entries_over_time) && f.cache.entries_over_time.length)
    out.push({ name: 'cache entries', unit: 'entries', points: pairPoints(f.cache.entries_over_time) });
  if (f.container && Array.isArray(f.container.entries_over_time) && f.container.entries_over_time.length)
    out.push({ name: 'container entries', unit: 'entries', points: pairPoints(f.container.entries_over_time) });
  if (f.type && Array.isArray(f.type.live_over_time) && f.type.live_over_time.length)
    out.push({ name: 'live classes', unit: 'classes', points: pairPoints(f.type.live_over_time) });
  return out;
}

// ---- the page's order ----------------------------------------------------------------------
var RELATIONS = {
  key_class: 'classes its keys keep missing on',
  same_call: 'created by the same call',
  holds_entries: 'memory its entries hold',
  same_library_call: 'other paths inside the same library',
  grows_with_entries: 'growing in step with its entries'
};
function relationLabel(r) { return RELATIONS[r] || String(r || 'related').replace(/_/g, ' '); }
// Each finding's number: its "id" (1-based position) or, from older analyzers, its position.
function findingId(f, i) { return num(f.id) > 0 ? num(f.id) : i + 1; }
// Root causes with their root finding and evidence, in the JSON's order, then the findings no
// root cause names. Without "root_causes" (older analyzers) every finding is in the rest.
function organize(data) {
  var findings = Array.isArray((data || {}).findings) ? data.findings : [];
  var byId = {};
  findings.forEach(function (f, i) { byId[findingId(f, i)] = { finding: f, id: findingId(f, i) }; });
  var used = {}, roots = [];
  (Array.isArray(data.root_causes) ? data.root_causes : []).forEach(function (rc, i) {
    var rootEntry = byId[num(rc.finding)];
    var evidence = [];
    (Array.isArray(rc.members) ? rc.members : []).forEach(function (m) {
      var e = byId[num(m.finding)];
      if (!e || num(m.finding) === num(rc.finding)) return;
      evidence.push({ finding: e.finding, id: e.id, relation: m.relation });
      used[e.id] = true;
    });
    if (rootEntry) used[rootEntry.id] = true;
    roots.push({ cause: rc, id: num(rc.id) > 0 ? num(rc.id) : i + 1, root: rootEntry || null, evidence: evidence });
  });
  var rest = [];
  findings.forEach(function (f, i) { if (!used[findingId(f, i)]) rest.push({ finding: f, id: findingId(f, i) }); });
  return { roots: roots, rest: rest };
}
// Evidence grouped by relation, in the order the relations are first met.
function evidenceGroups(evidence) {
  var groups = [], at = {};
  evidence.forEach(function (e) {
    var r = e.relation || 'related';
    if (!(r in at)) { at[r] = groups.length; groups.push({ relation: r, label: relationLabel(r), items: [] }); }
    groups[at[r]].items.push(e);
  });
  return groups;
}
// The headline: root causes when the analyzer names them, and the findings behind them.
function verdictText(data) {
  var findings = Array.isArray(data.findings) ? data.findings : [];
  if (!findings.length) return 'no unbounded growth found';
  var roots = Array.isArray(data.root_causes) ? data.root_causes : [];
  var nf = plural(findings.length, 'unbounded growth finding', 'unbounded growth findings');
  if (!roots.length) {
    return nf + ', ' + bytes(findings.reduce(function (a, f) { return a + num(f.retained_bytes); }, 0)) + ' retained';
  }
  var held = roots.reduce(function (a, r) { return a + num(r.retained_bytes); }, 0);
  return plural(roots.length, 'root cause', 'root causes') + ' of unbounded growth' +
         (roots.length === 1 && roots[0].title ? ': ' + roots[0].title : '') +
         ' (' + nf + ', ' + bytes(held) + ' retained)';
}

var growtraceFormat = {
  num: num, bytes: bytes, seconds: seconds, count: count, plural: plural, perSecond: perSecond,
  shorten: shorten, basename: basename,
  niceStep: niceStep, axisTicks: axisTicks, tickLabels: tickLabels, assignAxes: assignAxes, UNIT_NAMES: UNIT_NAMES,
  isUnnamed: isUnnamed, isPython: isPython, frameLabel: frameLabel, frameWhere: frameWhere, keyFrame: keyFrame,
  findingExtra: findingExtra, findingTitle: findingTitle, kindLabel: kindLabel,
  sameStack: sameStack, isFrameList: isFrameList, findingStacks: findingStacks,
  numberLabels: numberLabels, numberWidthCh: numberWidthCh,
  isSampled: isSampled, estBytes: estBytes, estCount: estCount, findingFigures: findingFigures,
  seriesPoints: seriesPoints, pairPoints: pairPoints, findingSeries: findingSeries,
  relationLabel: relationLabel, findingId: findingId, organize: organize, evidenceGroups: evidenceGroups,
  verdictText: verdictText
};
if (typeof module === 'object' && module.exports) module.exports = growtraceFormat;
