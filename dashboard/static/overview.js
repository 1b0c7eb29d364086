// Overview: this month's usage and a bar chart of the last 30 days.
'use strict';
(function () {
  const { api, fail, fmtNum } = window.vs;
  const SVG = 'http://www.w3.org/2000/svg';

  // nice rounds a maximum up to 1, 2 or 5 times a power of ten.
  function nice(m) {
    const p = Math.pow(10, Math.floor(Math.log10(m)));
    return [1, 2, 5, 10].map((f) => f * p).find((x) => x >= m);
  }

  const day = (d) => new Date(d + 'T00:00:00Z').toLocaleDateString('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });

  function chart(daily) {
    const svg = document.getElementById('chart');
    svg.querySelectorAll('rect, line').forEach((r) => r.remove());
    const total0 = daily.reduce((a, d) => a + d.characters, 0);
    // With no usage yet the axes keep a nominal scale.
    const max = total0 > 0 ? nice(Math.max(1, ...daily.map((d) => d.characters))) : 1000;
    document.getElementById('y-max').textContent = fmtNum(max);
    document.getElementById('y-mid').textContent = fmtNum(max / 2);
    for (const y of [10, 65]) {
      const l = document.createElementNS(SVG, 'line');
      for (const [k, v] of Object.entries({ x1: 0, x2: 300, y1: y, y2: y, class: 'grid', 'vector-effect': 'non-scaling-stroke' })) l.setAttribute(k, v);
      svg.append(l);
    }
    document.getElementById('x-first').textContent = day(daily[0].date);
    document.getElementById('x-mid').textContent = day(daily[Math.floor(daily.length / 2)].date);
    document.getElementById('x-last').textContent = 'today, ' + day(daily[daily.length - 1].date);
    document.getElementById('chart-empty').hidden = total0 > 0;
    const w = 300 / daily.length;
    daily.forEach((d, i) => {
      const h = d.characters > 0 ? Math.max(2, (d.characters / max) * 110) : 1;
      const r = document.createElementNS(SVG, 'rect');
      r.setAttribute('x', (i * w + w * 0.1).toFixed(2));
      r.setAttribute('width', (w * 0.8).toFixed(2));
      r.setAttribute('y', (120 - h).toFixed(2));
      r.setAttribute('height', h.toFixed(2));
      if (d.characters <= 0) r.setAttribute('class', 'zero');
      const t = document.createElementNS(SVG, 'title');
      t.textContent = d.date + ': ' + fmtNum(d.characters) + ' characters';
      r.append(t);
      svg.append(r);
    });
    const total = daily.reduce((a, d) => a + d.characters, 0);
    const today = daily[daily.length - 1];
    document.getElementById('chart-caption').textContent =
      fmtNum(total) + ' characters in the last 30 days; today (' + today.date + ') ' + fmtNum(today.characters) + '.';
    const rows = document.getElementById('daily-rows');
    rows.replaceChildren(...daily.slice().reverse().map((d) => {
      const tr = document.createElement('tr');
      tr.append(Object.assign(document.createElement('td'), { textContent: d.date }),
        Object.assign(document.createElement('td'), { textContent: fmtNum(d.characters) }));
      return tr;
    }));
  }

  async function load() {
    try {
      const u = await api('GET', '/usage');
      document.getElementById('u-used').textContent = fmtNum(u.used) + ' characters';
      document.getElementById('u-allowance').textContent = fmtNum(u.allowance) + ' characters';
      document.getElementById('u-credits').textContent = fmtNum(u.credits);
      document.getElementById('u-remaining').textContent = fmtNum(u.remaining) + ' characters';
      document.getElementById('usage-facts').setAttribute('aria-busy', 'false');
      chart(u.daily);
    } catch (e) { fail(e); }
  }
  load();
})();
