// The token strip: the prompt's tokens as spans, shaded by a weight each (or HTML built by viz).
// A click sends `clicked` (a position); a drag or a shift-click sends `span`. A new selection
// or head scrolls the strongest weight into view (on a long prompt the attended tokens may lie
// a thousand tokens from the selected one); two buttons above go to either.

// x with `digits` decimals as Python's f'{x:.{digits}f}' writes it. toFixed rounds a value
// exactly halfway between two outputs away from zero, Python to the even digit (0.0625 is
// '0.062' there, '0.063' here). A double is exactly halfway only when x * 2 ** (digits + 1)
// is an odd integer (an odd multiple of 1/16 for three digits).
function fixed(x, digits) {
  const text = x.toFixed(digits);
  const halves = x * 2 ** (digits + 1);  // exact: a power of two
  if (!Number.isInteger(halves) || halves % 2 === 0 || Number(text.at(-1)) % 2 === 0) return text;
  return (x - Math.sign(x) * 0.5 * 10 ** -digits).toFixed(digits);  // the even neighbour
}

export default function(component) {
  const { data, parentElement, setTriggerValue } = component;
  let root = parentElement.querySelector('.toks');
  if (!root) { root = document.createElement('div'); root.className = 'toks';
               parentElement.appendChild(root); }
  let nav = parentElement.querySelector('.toknav');
  if (!nav) {
    nav = document.createElement('div'); nav.className = 'toknav';
    for (const which of ['sel', 'focus']) {
      const b = document.createElement('button'); b.type = 'button'; b.dataset.go = which;
      nav.appendChild(b);
    }
    parentElement.insertBefore(nav, root);
  }
  let toks = root.querySelectorAll('.tok');
  let same;  // whether the strip holds these tokens already (set below)
  if (data.shaded) {
    // Tokens (plain text) and their weights: the spans are built once per prompt and only
    // restyled after that. The rule is viz.token_view.token_spans's, to the character:
    // colour = (w / top) ** 0.6 of the heatmap's dark blue, top the largest finite weight,
    // white text past half of it (tests/e2e/test_frontend.py holds the two together). Signed
    // (a linear layer's mixing entries): |w| / top of red (w >= 0) or blue, top the largest |w|.
    const s = data.shaded, raw = atob(s.weights), buf = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) buf[i] = raw.charCodeAt(i);
    const w = new Float32Array(buf.buffer);
    same = toks.length === s.tokens.length && toks.length > 0;
    for (let i = 0; same && i < toks.length; i++) same = toks[i].textContent === s.tokens[i];
    if (!same) {
      const frag = document.createDocumentFragment();
      s.tokens.forEach((text, i) => {
        const el = document.createElement('span'); el.className = 'tok';
        el.dataset.pos = String(i); el.textContent = text; frag.appendChild(el);
      });
      root.replaceChildren(frag);
      toks = root.querySelectorAll('.tok');
    }
    let top = 0;
    for (const v of w) {
      const m = s.signed ? Math.abs(v) : v;
      if (m > top && m !== Infinity) top = m;  // NaN (masked) never wins
    }
    if (!(top > 0)) top = 1;
    const paint = (v) => {
      const share = s.signed ? Math.abs(v) / top : v / top;
      const alpha = Math.pow(Math.min(Math.max(share, 0), 1), 0.6);
      const rgb = !s.signed ? '8, 81, 156' : v >= 0 ? '178, 24, 43' : '33, 102, 172';
      return `background:rgba(${rgb}, ${fixed(alpha, 3)});` + (share > 0.5 ? 'color:white;' : '');
    };
    toks.forEach((el, i) => {
      const v = w[i], seen = !Number.isNaN(v);
      let style = 'opacity:0.45;', tip = `(${i}) ${s.tokens[i]}: masked`;
      if (seen) {
        style = paint(v);
        tip = `(${i}) ${s.tokens[i]}: ${s.verb} ${fixed(v, 3)}`;
      }
      if (el.getAttribute('style') !== style) el.setAttribute('style', style);
      if (el.title !== tip) el.title = tip;
      el.classList.toggle('sel', i === s.selected);
    });
    // A head's learned sink: one more item before the tokens, shaded by the same rule (a sink
    // above the strongest token is drawn darkest), with its weight in the tooltip.
    let sink = parentElement.querySelector('.toksink');
    if (s.sink === null || s.sink === undefined) {
      if (sink) sink.remove();
    } else {
      if (!sink) {
        sink = document.createElement('span'); sink.className = 'toksink';
        sink.textContent = 'sink';
      }
      if (root.firstChild !== sink) root.prepend(sink);  // inline, before the first token
      sink.setAttribute('style', paint(s.sink));
      sink.title = `learned sink (no token): ${s.verb} ${fixed(s.sink, 3)}`;
    }
  } else {
    // Built and escaped by viz (the generated tokens). The same tokens again: only their
    // colours, tooltips and outlines change, so the spans are kept and restyled; the strip is
    // laid out again only when its tokens change.
    const tpl = document.createElement('template');
    tpl.innerHTML = data.html;
    const fresh = tpl.content.children;
    same = toks.length === fresh.length && toks.length > 0;
    for (let i = 0; same && i < toks.length; i++) {
      same = toks[i].textContent === fresh[i].textContent;
    }
    if (same) {
      for (let i = 0; i < toks.length; i++) {
        const a = toks[i], b = fresh[i];
        for (const name of ['class', 'style', 'title']) {
          const v = b.getAttribute(name);
          if (a.getAttribute(name) !== v) a.setAttribute(name, v);
        }
      }
    } else {
      root.replaceChildren(tpl.content);
      toks = root.querySelectorAll('.tok');
    }
  }
  const mark = (cls, a, b) => toks.forEach((el) => {
    const p = Number(el.dataset.pos); el.classList.toggle(cls, p >= a && p < b); });
  if (data.span) mark('span', data.span[0], data.span[1]);
  const posOf = (ev) => { const el = ev.target.closest('.tok');
                          return el ? Number(el.dataset.pos) : null; };
  const sendSpan = (a, b) => setTriggerValue(
    'span', {start: Math.min(a, b), stop: Math.max(a, b) + 1, at: Date.now()});
  // A drag over several tokens, or a shift-click, selects a span; a plain click one token.
  let start = null, dragged = false, swallow = false;
  root.onmousedown = (ev) => { const p = posOf(ev); if (p === null) return;
                               ev.preventDefault();  // no text selection while choosing tokens
                               if (!ev.shiftKey) { start = p; dragged = false; } };
  root.onmousemove = (ev) => { if (start === null) return; const p = posOf(ev);
    if (p === null || (p === start && !dragged)) return;
    dragged = true; mark('drag', Math.min(start, p), Math.max(start, p) + 1); };
  root.onmouseup = (ev) => { const p = posOf(ev), from = start, moved = dragged;
    start = null; dragged = false; mark('drag', 0, 0);
    if (!moved || from === null || p === null || p === from) return;
    swallow = true; setTimeout(() => { swallow = false; }, 0);  // the click this mouseup makes
    sendSpan(from, p); };
  root.onmouseleave = () => { start = null; dragged = false; mark('drag', 0, 0); };
  root.onclick = (ev) => {  // one listener for every token, however long the prompt
    const p = posOf(ev);
    if (p === null || swallow) return;
    if (ev.shiftKey && data.anchor !== null && data.anchor !== undefined) sendSpan(data.anchor, p);
    else { root.dataset.clicked = String(p); setTriggerValue('clicked', p); }
  };
  const reveal = (el) => {  // centre ``el`` in the strip unless it is on screen already
    const top = el.offsetTop - root.offsetTop;
    if (top < root.scrollTop || top > root.scrollTop + root.clientHeight - 30)
      root.scrollTop = Math.max(0, top - root.clientHeight / 2);
  };
  const chosen = root.querySelector('.tok.sel');
  const at = data.shaded ? data.shaded.focus : null;
  const focus = at !== null && at !== undefined && at < toks.length ? toks[at] : null;
  const target = focus || chosen;
  const shown = (chosen ? chosen.dataset.pos : '') + '/' + (target ? target.dataset.pos : '');
  const moved = !same || root.dataset.shown !== shown;
  root.dataset.shown = shown;
  const clicked = chosen && root.dataset.clicked === chosen.dataset.pos;
  delete root.dataset.clicked;
  if (target && moved && !clicked) reveal(target);
  const [goSel, goFocus] = nav.querySelectorAll('button');
  nav.style.display = focus && chosen && focus !== chosen ? '' : 'none';
  if (focus && chosen) {
    goSel.textContent = `Go to the selected token (${chosen.dataset.pos})`;
    goFocus.textContent = `Go to the strongest weight after the first token (${at})`;
    goSel.onclick = () => reveal(chosen);
    goFocus.onclick = () => reveal(focus);
  }
}
