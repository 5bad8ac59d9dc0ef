// The HTML report's pure functions (analyzer/report/report_html/report_format.js), run by node's own
// test runner: `node --test tests/js/` (ctest runs it as report_js). The fixture is a real
// `growtrace analyze --json` of the openai reproduction in threads mode, cut down by hand to 14
// findings and two root causes.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const fs = require('node:fs');

const F = require(path.join(__dirname, '..', '..', 'analyzer', 'report', 'report_html', 'report_format.js'));
const fixture = () => JSON.parse(fs.readFileSync(path.join(__dirname, 'fixtures', 'openai_threads_report.json'), 'utf8'));
// The same report as an analyzer from before root causes wrote it.
function withoutRootCauses(d) {
  delete d.root_causes;
  d.findings.forEach((f) => { delete f.id; delete f.role; delete f.root_cause; });
  return d;
}

test('bytes and seconds read as the text report writes them', () => {
  assert.equal(F.bytes(0), '0 B');
  assert.equal(F.bytes(999), '999 B');
  assert.equal(F.bytes(12244502), '12.2 MB');
  assert.equal(F.bytes(1500), '1.50 KB');
  assert.equal(F.bytes(-2000), '-2.00 KB');
  assert.equal(F.seconds(0.25), '250 ms');
  assert.equal(F.seconds(45.8), '45.8 s');
  assert.equal(F.seconds(131.8), '2.2 min');
  assert.equal(F.perSecond(0.8601, 'entries'), '0.86 entries/s');
  assert.equal(F.perSecond(0.0123, 'classes'), '0.012 classes/s');
  assert.equal(F.perSecond(142326, 'bytes'), '142.3 KB/s');
  assert.equal(F.plural(1, 'class', 'classes'), '1 class');
  assert.equal(F.plural(1234, 'class', 'classes'), '1,234 classes');
});

test('a byte axis has round ticks in one unit, and no two read the same', () => {
  const cases = [[12244502, 'MB'], [282240, 'KB'], [1, 'B'], [3, 'B'], [0, 'KB'], [999, 'KB'], [180, 'B'], [1.2e9, 'GB'], [3100, 'KB']];
  for (const [max, unit] of cases) {
    const ticks = F.axisTicks(max, 'bytes');
    assert.ok(ticks[ticks.length - 1] >= max, `ticks of ${max} reach it`);
    assert.ok(ticks.length >= 2 && ticks.length <= 11, `${ticks.length} ticks for ${max}`);
    const labels = F.tickLabels(ticks, 'bytes');
    assert.equal(new Set(labels).size, labels.length, `distinct: ${labels}`);
    for (const l of labels) assert.match(l, new RegExp(`^[0-9.]+ ${unit}$`), `${l} for ${max}`);
  }
  assert.deepEqual(F.tickLabels(F.axisTicks(12244502, 'bytes'), 'bytes'),
                   ['0.0 MB', '2.5 MB', '5.0 MB', '7.5 MB', '10.0 MB', '12.5 MB']);
});

test('a count axis steps by whole numbers', () => {
  for (const max of [0, 1, 2, 3, 7, 32, 74, 2077, 45000, 3.2e7]) {
    const ticks = F.axisTicks(max, 'entries');
    assert.ok(ticks[ticks.length - 1] >= max);
    for (const t of ticks) assert.equal(t, Math.round(t), `whole ticks for ${max}: ${ticks}`);
    const labels = F.tickLabels(ticks, 'entries');
    assert.equal(new Set(labels).size, labels.length, `distinct: ${labels}`);
  }
  assert.deepEqual(F.axisTicks(1, 'classes'), [0, 1]);
  assert.deepEqual(F.tickLabels(F.axisTicks(74, 'entries'), 'entries'), ['0', '20', '40', '60', '80']);
  assert.deepEqual(F.tickLabels([0, 20000, 40000], 'entries'), ['0', '20k', '40k']);
});

test('a chart puts its first unit on the left and a second on the right', () => {
  const series = [{ unit: 'bytes' }, { unit: 'entries' }, { unit: 'bytes' }];
  assert.deepEqual(F.assignAxes(series), { left: 'bytes', right: 'entries' });
  assert.deepEqual(series.map((s) => s.axis), ['left', 'right', 'left']);
  const classes = [{ unit: 'classes' }];
  assert.deepEqual(F.assignAxes(classes), { left: 'classes', right: null });
});

test('findings are titled by the cache, the class, or a named function', () => {
  const d = fixture();
  const titles = d.findings.map(F.findingTitle);
  assert.equal(titles[0], 'openai._models._CachedTypeAdapter');
  assert.equal(d.findings[1].kind, 'duplicate_types');
  assert.equal(titles[1], d.findings[1].type.name);
  assert.match(titles[1], /^openai\.types\.responses\.parsed_response\./);
  for (const t of titles) {
    assert.doesNotMatch(t, /\?\?|^type_new|infinite_lru_cache_wrapper/, t);
  }
  // A stack whose innermost frames have no symbol is named by the Python code that called in.
  const unnamed = d.findings.find((f) => f.kind === 'unbounded_growth' && f.frames[0].function === '??');
  assert.ok(unnamed, 'the fixture has a stack of unnamed frames');
  assert.equal(F.findingTitle(unnamed), 'create_schema_validator (_schema_validator.py:51)');
});

test('a frame without a symbol is named after its module', () => {
  const f = { function: '??', module: '_pydantic_core.so', file: '', line: 0 };
  assert.equal(F.frameLabel(f), 'unnamed function in _pydantic_core.so');
  assert.equal(F.frameLabel({ function: '' }), 'unnamed function in an unknown module');
  assert.equal(F.keyFrame([f, { function: 'main', module: 'prog', file: 'a.c', line: 3 }]).function, 'main');
  // Only unnamed frames: the first stays the key, and is still named by its module.
  assert.equal(F.frameLabel(F.keyFrame([f])), 'unnamed function in _pydantic_core.so');
  // Allocator entry points and std:: internals are skipped in a native stack.
  const native = [{ function: 'malloc', module: 'libc.so.6' }, { function: 'std::vector<int>::_M_realloc_insert', module: 'p' },
                  { function: 'remember_result', module: 'p', file: 'memo.cpp', line: 42 }];
  assert.equal(F.findingTitle({ kind: 'unbounded_growth', frames: native }), 'remember_result (memo.cpp:42)');
});

test('each stack of a finding is shown once', () => {
  const d = fixture();
  for (const f of d.findings) {
    const stacks = F.findingStacks(f);
    assert.ok(stacks.length >= 1);
    for (let i = 0; i < stacks.length; i++)
      for (let j = i + 1; j < stacks.length; j++) assert.ok(!F.sameStack(stacks[i].frames, stacks[j].frames));
  }
  const cache = d.findings[0];
  assert.ok(F.sameStack(cache.frames, cache.cache.inserted_from), 'the fixture repeats the stack');
  assert.deepEqual(F.findingStacks(cache).map((s) => s.caption), ['Inserting stack']);
  // A different second stack is kept.
  const other = structuredClone(cache);
  other.cache.inserted_from = other.cache.inserted_from.slice(1);
  assert.deepEqual(F.findingStacks(other).map((s) => s.caption), ['Inserting stack', 'inserted from']);
});

test('list numbers are whole and fit their column', () => {
  assert.deepEqual(F.numberLabels(3), ['1.', '2.', '3.']);
  const labels = F.numberLabels(40);
  assert.equal(labels[9], '10.');
  assert.equal(labels[39], '40.');
  for (const l of labels) assert.ok(l.length <= F.numberWidthCh(40), l);
  assert.equal(F.numberWidthCh(9), 2);
  assert.equal(F.numberWidthCh(10), 3);
  assert.equal(F.numberWidthCh(100), 4);
});

test('figures fit the kind: classes created and alive, cache entries, bytes', () => {
  const d = fixture();
  const rows = (f) => Object.fromEntries(F.findingFigures(f, d));
  const type = rows(d.findings[1]);
  assert.equal(type['classes created'], String(d.findings[1].type.created));
  assert.equal(type['alive at end'], String(d.findings[1].type.live_at_end));
  assert.match(type['creation rate'], /classes\/s$/);
  assert.ok(!('retained at end' in type) && !('allocations' in type), 'no bytes for a class count');
  const cache = rows(d.findings[0]);
  assert.equal(cache.entries, '0 \u2192 74 (no maxsize)');
  assert.equal(cache['retained at end'], '12.2 MB');
  const stack = rows(d.findings[6]);
  assert.match(stack['growth rate'], /B\/s$/);
  assert.ok('allocations' in stack);
});

test('each finding charts its own units', () => {
  const d = fixture();
  const units = (f) => F.findingSeries(f, d.timeline).map((s) => s.unit);
  assert.deepEqual(units(d.findings[0]), ['bytes', 'entries']);
  assert.deepEqual(units(d.findings[1]), ['classes']);
  assert.deepEqual(units(d.findings[6]), ['bytes']);
  const held = F.findingSeries(d.findings[6], d.timeline)[0].points;
  assert.deepEqual(held[held.length - 1], [d.timeline[d.timeline.length - 1].t, d.findings[6].retained_series.at(-1)]);
});

test('root causes come first, each with its evidence, and nothing is listed twice', () => {
  const d = fixture();
  const order = F.organize(d);
  assert.equal(order.roots.length, d.root_causes.length);
  const first = order.roots[0];
  assert.equal(first.root.id, 1);
  assert.equal(first.root.finding.kind, 'cache_growth');
  assert.equal(first.evidence.length, d.root_causes[0].members.length);
  assert.deepEqual(first.evidence.map((e) => e.id), d.root_causes[0].members.map((m) => m.finding));
  const seen = new Set();
  for (const r of order.roots) for (const e of [r.root, ...r.evidence]) {
    assert.ok(!seen.has(e.id), `#${e.id} twice`);
    seen.add(e.id);
  }
  for (const e of order.rest) assert.ok(!seen.has(e.id));
  assert.equal(seen.size + order.rest.length, d.findings.length);
  const groups = F.evidenceGroups(first.evidence).map((g) => g.relation);
  assert.deepEqual(groups, ['key_class', 'same_call', 'holds_entries']);
  assert.match(F.verdictText(d), /^2 root causes of unbounded growth \(14 unbounded growth findings, [0-9.]+ MB retained\)$/);
});

test('a report without root causes lists every finding by position', () => {
  const d = withoutRootCauses(fixture());
  const order = F.organize(d);
  assert.equal(order.roots.length, 0);
  assert.deepEqual(order.rest.map((e) => e.id), d.findings.map((_, i) => i + 1));
  assert.match(F.verdictText(d), /^14 unbounded growth findings, [0-9.]+ MB retained$/);
  assert.equal(F.verdictText({ findings: [] }), 'no unbounded growth found');
  // A member naming a finding that is not there is left out, not drawn empty.
  const broken = fixture();
  broken.root_causes[0].members.push({ finding: 99, relation: 'holds_entries' });
  assert.equal(F.organize(broken).roots[0].evidence.length, broken.root_causes[0].members.length - 1);
});

test('sampled figures carry their uncertainty', () => {
  const d = { sampling: { mean_bytes: 524288 } };
  assert.equal(F.estBytes(d, 2e6, 1e5, 12), '2.00 MB \u00b1 100.0 KB (12 samples)');
  assert.equal(F.estCount(d, 5), '\u2248 5');
  assert.equal(F.estBytes({ sampling: { mean_bytes: 0 } }, 2e6, 0, 12), '2.00 MB');
});

// A container_growth finding as `growtrace analyze --json` writes it (containers.py
// --case element_dict), its series cut to three walks.
function containerFinding() {
  const frames = [{ function: 'Table.put', file: '/src/test_programs/python/containers.py', line: 45, module: '' },
                  { function: 'main', file: '/src/test_programs/python/containers.py', line: 160, module: '' }];
  return {
    kind: 'container_growth', id: 5, role: 'root', root_cause: 1, retained_bytes: 2516582, growth_bytes_per_s: 0,
    started_at_s: 0.61, confidence: 1, reason: 'entries keep rising through the run (growth in 4 of 4 quarters, never falling back)',
    frames: frames,
    container: {
      name: "__main__.REGISTRIES['users'].by_id", owner_type: '__main__.Table', kind: 'dict', reached_from_module: true,
      walks: 6, entries_first: 2500, entries_last: 10000, growth_entries_per_s: 1674.2, inserted_from: frames,
      key_types: ['int'], value_types: ['dict'], retained_bytes: 2516582, verdict: 'unbounded', reason: 'entries keep rising',
      entries_over_time: [[0.61, 2500], [2.3, 5000], [5.09, 10000]]
    }
  };
}

test('a growing container is named by its path, with its entries over the walks and where it is filled', () => {
  const f = containerFinding();
  assert.equal(F.findingTitle(f), "__main__.REGISTRIES['users'].by_id");
  assert.equal(F.kindLabel(f.kind), 'growing container');
  assert.equal(F.findingExtra(f), f.container);
  const rows = new Map(F.findingFigures(f, {}));
  assert.equal(rows.get('entries'), '2,500 \u2192 10,000 (6 walks)');
  assert.equal(rows.get('entries added'), '1674 entries/s');
  assert.equal(rows.get('retained at end'), '2.52 MB');
  assert.ok(!rows.has('live allocations') && !rows.has('allocations'), [...rows.keys()].join(', '));
  // Its inserting line is the finding's own stack: shown once.
  const stacks = F.findingStacks(f);
  assert.deepEqual(stacks.map((s) => s.caption), ['Inserting stack']);
  const series = F.findingSeries(f, []);
  assert.deepEqual(series.map((s) => [s.name, s.unit, s.points.length]), [['container entries', 'entries', 3]]);
});

test('a container root cause leads the page with its evidence folded under it', () => {
  const container = containerFinding();
  const stack = { kind: 'unbounded_growth', id: 1, role: 'evidence', root_cause: 1, retained_bytes: 2000000,
                  frames: [{ function: 'make_value', file: 'containers.py', line: 33 }] };
  const data = {
    findings: [stack, container],
    root_causes: [{ id: 1, finding: 2, kind: 'container_growth', title: "dict __main__.REGISTRIES['users'].by_id keeps growing",
                    members: [{ finding: 1, relation: 'holds_entries' }] }]
  };
  container.id = 2;
  const order = F.organize(data);
  assert.equal(order.roots.length, 1);
  assert.equal(order.roots[0].root.finding, container);
  assert.deepEqual(order.roots[0].evidence.map((e) => [e.id, e.relation]), [[1, 'holds_entries']]);
  assert.equal(order.rest.length, 0);
  assert.equal(F.verdictText(data), "1 root cause of unbounded growth: dict __main__.REGISTRIES['users'].by_id keeps growing" +
                                    ' (2 unbounded growth findings, 0 B retained)');
});
