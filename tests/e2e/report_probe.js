// Injected by the report tests (report_test.cpp) at the end of a rendered HTML report: opens
// every folded part, measures the page as laid out, and leaves what it saw as JSON in
// the element pre#gt-probe, which `chromium --dump-dom` then prints. The JSON is pure ASCII with
// <, > and & escaped, so the dump holds it verbatim.
(function () {
  'use strict';
  function all(root, selector) { return Array.prototype.slice.call(root.querySelectorAll(selector)); }
  function text(e) { return e ? e.textContent : null; }
  all(document, 'details').forEach(function (d) { d.open = true; });
  var page = document.scrollingElement || document.documentElement;
  var out = {
    client_width: page.clientWidth,
    scroll_width: page.scrollWidth,
    headings: all(document, '#gt-report h2').map(text),
    verdict: text(document.querySelector('.verdict')),
    root_causes: all(document, '.card.root-cause').map(function (card) {
      return {
        id: card.id,
        title: text(card.querySelector('h3 .title')),
        summary: text(card.querySelector('.summary')),
        remedy: text(card.querySelector('.remedy')),
        findings: all(card, '.card.finding').map(function (f) { return f.id; })
      };
    }),
    findings: all(document, '.card.finding').map(function (card) {
      var box = card.getBoundingClientRect();
      return {
        id: card.id,
        kind: card.className,
        title: text(card.querySelector('h3 .title')),
        figures: all(card, 'table.kv tr').map(function (tr) { return [text(tr.cells[0]), text(tr.cells[1])]; }),
        stacks: all(card, 'ol.stack').map(function (ol) {
          return all(ol, 'li').map(function (li) {
            var n = li.querySelector('.n');
            return {
              text: text(li.querySelector('.frame')) || text(li),
              number: text(n),
              // A number is cut when its text is wider than its box or its box starts left
              // of the card.
              cut: !!n && (n.scrollWidth > n.clientWidth || n.getBoundingClientRect().left < box.left)
            };
          });
        })
      };
    }),
    charts: all(document, 'svg.chart').map(function (svg) {
      return {
        label: svg.getAttribute('aria-label'),
        left: all(svg, 'text.y-left').map(text),
        right: all(svg, 'text.y-right').map(text),
        left_unit: text(svg.querySelector('text.axis-left')),
        right_unit: text(svg.querySelector('text.axis-right')),
        legend: all(svg, 'text.legend').map(text)
      };
    }),
    // The elements that reach past the right edge of the window, if any.
    too_wide: all(document, '#gt-report *').filter(function (e) {
      return e.getBoundingClientRect().right > page.clientWidth + 0.5;
    }).slice(0, 8).map(function (e) { return e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + (e.textContent || '').slice(0, 60); })
  };
  var json = JSON.stringify(out).replace(/[<>&\u007f-\uffff]/g, function (c) {
    return '\\u' + ('0000' + c.charCodeAt(0).toString(16)).slice(-4);
  });
  var pre = document.createElement('pre');
  pre.id = 'gt-probe';
  pre.textContent = json;
  document.body.appendChild(pre);
}());
