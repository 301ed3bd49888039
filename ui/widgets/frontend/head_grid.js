// The head grid: one button per head (a thumbnail of its pattern, or a number on its colour),
// the selected head outlined and scrolled into view; a cell with `none` (a layer with fewer
// heads than the widest) is an empty slot. A click sends `clicked` (the head, L.H);
// a grid drawn afresh without its pictures sends `missing`.

export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let box = parentElement.querySelector('.gridbox');
  if (!box) { box = document.createElement('div'); box.className = 'gridbox';
              parentElement.appendChild(box); }
  let root = box.querySelector('.grid');
  if (!root) { root = document.createElement('div'); root.className = 'grid';
               box.appendChild(root); }
  root.dataset.kind = data.kind || 'pictures';
  if (data.cells) {  // null: the browser already holds these pictures, only the choice moved
    const layers = data.layers || null;  // each layer's kind: a mark under its number
    root.style.gridTemplateColumns =
      `${layers ? 3.4 : 2}em repeat(${data.n_heads}, minmax(0, ${data.cell}px))`;
    root.replaceChildren();
    const label = (text, top) => { const d = document.createElement('div');
                                   d.className = top ? 'lab top' : 'lab';
                                   d.textContent = text; root.appendChild(d); return d; };
    label('L\\H', true);
    for (let h = 0; h < data.n_heads; h++) label(String(h), true);
    data.cells.forEach((cell, i) => {
      if (i % data.n_heads === 0) {
        const layer = Math.floor(i / data.n_heads), row = label(String(layer));
        const about = layers && layers[layer];
        if (about) {
          const mark = document.createElement('small'); mark.className = 'kind';
          mark.textContent = about.mark; row.appendChild(mark); row.title = about.title;
        }
      }
      if (cell.none) {  // a layer with fewer heads than the widest: an empty slot, no button
        const d = document.createElement('div'); d.className = 'none'; d.title = cell.none;
        root.appendChild(d);
        return;
      }
      const b = document.createElement('button');
      b.title = cell.title || ('head ' + cell.id); b.dataset.head = cell.id;
      b.setAttribute('aria-label', 'open head ' + cell.id);
      if (cell.src) {
        const img = document.createElement('img'); img.src = cell.src; img.alt = 'head ' + cell.id;
        b.appendChild(img);
        if (cell.badge) {  // what this prompt's scores mark the head as (letters, escaped)
          const mark = document.createElement('span'); mark.className = 'badge';
          mark.textContent = cell.badge; b.classList.add('marked'); b.appendChild(mark);
        }
      } else {  // a number on its colour (the divergence grid)
        const d = document.createElement('div'); d.className = 'fill';
        d.style.background = cell.fill; d.style.color = cell.ink; d.textContent = cell.text;
        b.appendChild(d);
      }
      b.onclick = () => {
        root.querySelectorAll('button.sel').forEach((el) => el.classList.remove('sel'));
        b.classList.add('sel');
        root.dataset.clicked = cell.id;
        setTriggerValue('clicked', cell.id);
      };
      root.appendChild(b);
    });
  }
  if (!data.cells && !root.querySelector('button')) {
    setTriggerValue('missing', true);  // drawn afresh (the page moved it): ask for the pictures
    return;
  }
  const shown = root.querySelector('button.sel');
  if (!data.cells && shown && shown.dataset.head === data.selected) {
    delete root.dataset.clicked;
    return;  // the head outlined already: nothing to restyle, no layout to read
  }
  if (shown) shown.classList.remove('sel');
  const chosen = root.querySelector(`button[data-head="${CSS.escape(data.selected)}"]`);
  if (chosen) chosen.classList.add('sel');
  // A head clicked here is on screen already: read the layout only for a choice made elsewhere.
  const clicked = root.dataset.clicked === data.selected;
  delete root.dataset.clicked;
  if (chosen && data.scroll && !clicked) {
    const at = chosen.offsetTop;
    if (at < box.scrollTop || at > box.scrollTop + box.clientHeight - 40)
      box.scrollTop = Math.max(0, at - box.clientHeight / 2);
  }
}
