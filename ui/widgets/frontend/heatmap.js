// The explorer's detail heatmap, painted on a canvas: cells from colour indices, weights for
// the hover readout, token labels as canvas text, the colour bar, Save as PNG, and (where the
// page listens) a click that sends `clicked` with the cell's row and column.

const MAX_LABEL = 22;  // characters of a token label drawn on an axis
const cut = (t) => (t.length > MAX_LABEL ? t.slice(0, MAX_LABEL - 1) + '…' : t);
const bytes = (b64) => {
  const s = atob(b64), out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
};
const rgb = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));

// Where everything goes for a canvas ``width`` CSS pixels wide.
function layout(ctx, data, width) {
  ctx.font = '11px sans-serif';
  const widest = (labels) => labels.reduce((m, t) => Math.max(m, ctx.measureText(cut(t)).width), 0);
  const left = Math.ceil(Math.min(widest(data.rows), 170)) + 30;
  const top = Math.ceil(Math.min(widest(data.cols), 170) * Math.sin(Math.PI / 3)) + 36;
  // The colour bar (14 px off the cells, 14 wide), its tick labels, then its title turned on
  // its side: ``barTitle`` is the title's centre from the cells' right edge, and the margin
  // leaves room for the title's own height so that a saved PNG keeps all of it.
  const ticks = data.ticks.reduce((m, [, t]) => Math.max(m, ctx.measureText(t).width), 0);
  const barTitle = 14 + 14 + 6 + Math.ceil(ticks) + 14;
  const right = barTitle + 14, bottom = data.title ? 30 : 10;
  const plotW = Math.max(120, width - left - right);
  const plotH = Math.min(860, Math.max(200, 16 * data.n_rows));
  return { left, top, plotW, plotH, barTitle, cw: plotW / data.n_cols, ch: plotH / data.n_rows,
           W: left + plotW + right, H: top + plotH + bottom };
}

// The whole picture on ``canvas`` at ``scale`` device pixels per CSS pixel.
function paint(canvas, data, cells, box, scale) {
  const { left, top, plotW, plotH, barTitle, cw, ch, W, H } = box;
  canvas.width = Math.round(W * scale); canvas.height = Math.round(H * scale);
  canvas.style.width = W + 'px'; canvas.style.height = H + 'px';
  const ctx = canvas.getContext('2d');
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, W, H);
  ctx.imageSmoothingEnabled = false;  // a cell is a sharp block, however large
  ctx.drawImage(cells, left, top, plotW, plotH);
  ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle'; ctx.fillStyle = '#333';
  const rowStep = Math.max(1, Math.ceil(12 / ch)), colStep = Math.max(1, Math.ceil(12 / cw));
  const sel = data.selected;
  ctx.textAlign = 'right';
  for (let r = 0; r < data.n_rows; r++) {
    const mine = r === sel;
    if (!mine && (r % rowStep || (sel !== null && Math.abs(r - sel) < rowStep))) continue;
    ctx.fillStyle = mine ? '#c0392b' : '#333';
    ctx.fillText(cut(data.rows[r]), left - 4, top + (r + 0.5) * ch);
  }
  const key = data.selected_col ?? null;  // the selected token as a key ("to it" view)
  ctx.textAlign = 'left';
  for (let c = 0; c < data.n_cols; c++) {
    const mine = c === key;
    if (!mine && (c % colStep || (key !== null && Math.abs(c - key) < colStep))) continue;
    ctx.fillStyle = mine ? '#c0392b' : '#333';
    ctx.save(); ctx.translate(left + (c + 0.5) * cw, top - 4); ctx.rotate(-Math.PI / 3);
    ctx.fillText(cut(data.cols[c]), 0, 0); ctx.restore();
  }
  ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.font = '12px sans-serif';
  ctx.fillText(data.axes[0], left + plotW / 2, 10);
  ctx.save(); ctx.translate(10, top + plotH / 2); ctx.rotate(-Math.PI / 2);
  ctx.fillText(data.axes[1], 0, 0); ctx.restore();
  if (data.title) ctx.fillText(data.title, left + plotW / 2, top + plotH + 16);
  if (sel !== null) {
    ctx.strokeStyle = '#e4572e'; ctx.lineWidth = 2;
    ctx.strokeRect(left + 1, top + sel * ch, plotW - 2, Math.max(ch, 2));
  }
  if (key !== null) {
    ctx.strokeStyle = '#e4572e'; ctx.lineWidth = 2;
    ctx.strokeRect(left + key * cw, top + 1, Math.max(cw, 2), plotH - 2);
  }
  if (data.pinned) {
    const x = left + data.pinned * cw;
    ctx.strokeStyle = '#333'; ctx.lineWidth = 2; ctx.setLineDash([4, 3]);
    ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + plotH); ctx.stroke();
    ctx.setLineDash([]);
  }
  const bx = left + plotW + 14, bw = 14, n = data.colours.length;
  for (let i = 0; i < n; i++) {
    const c = data.colours[i];
    ctx.fillStyle = `rgb(${c[0]},${c[1]},${c[2]})`;
    ctx.fillRect(bx, top + plotH * (1 - (i + 1) / n), bw, plotH / n + 0.5);
  }
  ctx.strokeStyle = '#999'; ctx.lineWidth = 1; ctx.strokeRect(bx, top, bw, plotH);
  ctx.fillStyle = '#333'; ctx.textAlign = 'left'; ctx.font = '11px sans-serif';
  for (const [share, text] of data.ticks) {
    const y = top + plotH * (1 - share);
    ctx.beginPath(); ctx.moveTo(bx + bw, y); ctx.lineTo(bx + bw + 4, y); ctx.stroke();
    ctx.fillText(text, bx + bw + 6, y);
  }
  ctx.save(); ctx.translate(left + plotW + barTitle, top + plotH / 2); ctx.rotate(-Math.PI / 2);
  ctx.textAlign = 'center'; ctx.fillText(data.value_name, 0, 0); ctx.restore();
}

export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.hm');
  if (!root) {
    root = document.createElement('div'); root.className = 'hm';
    const bar = document.createElement('div'); bar.className = 'hmbar';
    const save = document.createElement('button');
    save.className = 'hmsave'; save.type = 'button'; save.textContent = 'Save as PNG';
    bar.appendChild(save);
    const canvas = document.createElement('canvas'); canvas.setAttribute('role', 'img');
    const tip = document.createElement('div'); tip.className = 'hmtip';
    root.append(bar, canvas, tip);
    parentElement.appendChild(root);
  }
  const canvas = root.querySelector('canvas'), tip = root.querySelector('.hmtip');
  const nr = data.n_rows, nc = data.n_cols;
  const levels = bytes(data.levels);
  const values = new Float32Array(bytes(data.values).buffer);
  // One pixel per cell, coloured from the table; scaled up when painted.
  const cells = document.createElement('canvas'); cells.width = nc; cells.height = nr;
  const cctx = cells.getContext('2d'), img = cctx.createImageData(nc, nr);
  const blank = rgb(data.blank);
  for (let i = 0; i < nr * nc; i++) {
    const c = levels[i] < data.colours.length ? data.colours[levels[i]] : blank;
    img.data[4 * i] = c[0]; img.data[4 * i + 1] = c[1]; img.data[4 * i + 2] = c[2];
    img.data[4 * i + 3] = 255;
  }
  cctx.putImageData(img, 0, 0);
  root.__shown = { values, n_rows: nr, n_cols: nc, selected: data.selected,
                  selected_col: data.selected_col ?? null };
  root.dataset.rows = String(nr); root.dataset.cols = String(nc);
  canvas.setAttribute('aria-label', data.label);
  const host = parentElement.host || parentElement;  // a shadow root has no width of its own
  let box = null;
  const draw = () => {
    // The column's width is read once (a layout read), again only when the window is resized.
    if (!root.dataset.room || root.dataset.width !== String(window.innerWidth)) {
      const width = host.clientWidth;
      root.dataset.room = width ? String(width) : '';
      root.dataset.width = String(window.innerWidth);
    }
    const room = root.dataset.room ? Number(root.dataset.room) : 900;
    box = layout(canvas.getContext('2d'), data, Math.max(360, room));
    paint(canvas, data, cells, box, window.devicePixelRatio || 1);
    // Where the cells are on the canvas, in CSS pixels (read by the browser tests).
    root.__shown.plot = { left: box.left, top: box.top, cw: box.cw, ch: box.ch,
                          barTitle: box.left + box.plotW + box.barTitle, width: box.W };
  };
  draw();
  if (!root.dataset.room) requestAnimationFrame(draw);  // not laid out yet: measure then
  root.__draw = draw;
  if (!root.dataset.listening) {
    root.dataset.listening = '1';
    window.addEventListener('resize', () => root.__draw && root.__draw());
  }
  root.querySelector('.hmsave').onclick = () => {
    const out = document.createElement('canvas');
    paint(out, data, cells, box, 2);
    out.toBlob((blob) => {
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob); a.download = data.file_name + '.png'; a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 5000);
    });
  };
  const fmt = (v) => (v === 0 || v >= 0.001 ? v.toFixed(4) : v.toExponential(2));
  // The cell under the pointer as [row, column] of the window drawn, or null off the cells.
  const cellAt = (ev) => {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left - box.left, y = ev.clientY - r.top - box.top;
    const c = Math.floor(x / box.cw), q = Math.floor(y / box.ch);
    return x >= 0 && y >= 0 && c < nc && q < nr ? [q, c] : null;
  };
  canvas.onmousemove = (ev) => {
    const cell = cellAt(ev);
    const v = cell ? values[cell[0] * nc + cell[1]] : NaN;
    if (!Number.isFinite(v)) { tip.style.display = 'none'; return; }
    const [q, c] = cell;
    tip.textContent = `query ${data.rows[q]}\nkey ${data.cols[c]}\n${data.value_name} ${fmt(v)}`;
    const at = root.getBoundingClientRect();
    tip.style.left = (ev.clientX - at.left + 14) + 'px';
    tip.style.top = (ev.clientY - at.top + 14) + 'px';
    tip.style.display = 'block';
  };
  canvas.onmouseleave = () => { tip.style.display = 'none'; };
  // Sent only where the page listens: a click elsewhere must not rerun the script.
  canvas.style.cursor = data.clickable ? 'pointer' : '';
  canvas.onclick = (ev) => {
    const cell = data.clickable ? cellAt(ev) : null;
    if (cell) setTriggerValue('clicked', { query: cell[0], key: cell[1] });
  };
}
