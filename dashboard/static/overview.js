// Overview: this month's usage and a bar chart of the last 30 days.
'use strict';
(function () {
  const { api, fail, fmtNum } = window.vs;
  const SVG = 'http://www.w3.org/2000/svg';

  function chart(daily) {
    const svg = document.getElementById('chart');
    svg.querySelectorAll('rect').forEach((r) => r.remove());
    const max = Math.max(1, ...daily.map((d) => d.characters));
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
