// The overview minimap: one head's whole pattern with the detail window outlined. A click or a
// drag sends `picked` (the query and key ranges, in positions).

export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.ov');
  if (!root) {
    root = document.createElement('div'); root.className = 'ov';
    root.innerHTML = '<img alt="whole pattern"><div class="win"></div><div class="drag"></div>';
    parentElement.appendChild(root);
    const cap = document.createElement('div'); cap.className = 'ovcap';
    parentElement.appendChild(cap);
  }
  const img = root.querySelector('img'), win = root.querySelector('.win');
  const drag = root.querySelector('.drag');
  parentElement.querySelector('.ovcap').textContent = data.caption;
  // Never wider than the column it sits in: a narrow column shrinks the picture, not the layout.
  const host = parentElement.host || parentElement;  // a shadow root has no width of its own
  // The column's width is read once (a layout read), again only when the window is resized.
  if (!root.dataset.room || root.dataset.width !== String(window.innerWidth)) {
    const width = host.clientWidth;
    root.dataset.room = width ? String(width - 2) : '';  // not laid out yet: measure next time
    root.dataset.width = String(window.innerWidth);
  }
  const room = root.dataset.room ? Number(root.dataset.room) : data.size;
  const size = Math.max(96, Math.min(data.size, room));
  img.src = data.src; img.style.width = size + 'px'; img.style.height = size + 'px';
  const scale = size / data.n;
  const box = (el, r0, r1, c0, c1) => {
    el.style.top = (r0 * scale) + 'px'; el.style.height = Math.max(2, (r1 - r0) * scale) + 'px';
    el.style.left = (c0 * scale) + 'px'; el.style.width = Math.max(2, (c1 - c0) * scale) + 'px';
  };
  box(win, data.rows[0], data.rows[1], data.cols[0], data.cols[1]);
  const at = (ev) => { const r = img.getBoundingClientRect();
    return [Math.min(data.n - 1, Math.max(0, Math.floor((ev.clientY - r.top) / scale))),
            Math.min(data.n - 1, Math.max(0, Math.floor((ev.clientX - r.left) / scale)))]; };
  let start = null;
  root.onmousedown = (ev) => { start = at(ev); drag.style.display = 'block';
                               box(drag, start[0], start[0] + 1, start[1], start[1] + 1);
                               ev.preventDefault(); };
  root.onmousemove = (ev) => { if (!start) return; const p = at(ev);
    box(drag, Math.min(start[0], p[0]), Math.max(start[0], p[0]) + 1,
        Math.min(start[1], p[1]), Math.max(start[1], p[1]) + 1); };
  const finish = (ev) => { if (!start) return; const p = at(ev); drag.style.display = 'none';
    const q0 = Math.min(start[0], p[0]), q1 = Math.max(start[0], p[0]);
    const k0 = Math.min(start[1], p[1]), k1 = Math.max(start[1], p[1]);
    start = null;
    setTriggerValue('picked', {q0: q0, q1: q1, k0: k0, k1: k1, at: Date.now()}); };
  root.onmouseup = finish; root.onmouseleave = (ev) => { if (start) finish(ev); };
}
