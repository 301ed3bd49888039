// Pictures for a plotly map: while the pointer rests on a point, the picture of the head it
// stands for (its `customdata[0]`, L.H) follows the pointer, with a caption.
//
// The component draws nothing of its own. It finds the chart drawn under the key it is given
// (Streamlit marks the chart's container with `st-key-<key>`) and listens to the chart's own
// hover events. The pictures stay in the window under the map's id, so a rerun that only moves
// the selection sends none; a component drawn afresh without them sends `missing`.

const EVERY_MS = 400;
const CLEAR = 34;  // px between the pointer and the picture: plotly's label is about 50 px tall
const TIP = 'atlas-map-picture';

function tip() {
  let box = document.getElementById(TIP);
  if (box) return box;
  box = document.createElement('div');
  box.id = TIP;
  box.setAttribute('role', 'tooltip');
  Object.assign(box.style, {
    position: 'fixed', display: 'none', zIndex: 100000, pointerEvents: 'none',
    background: '#fff', border: '1px solid #c9d3df', borderRadius: '4px', padding: '4px',
    boxShadow: '0 2px 8px rgba(0,0,0,0.15)', font: '11px sans-serif', color: '#333',
  });
  const img = document.createElement('img');
  Object.assign(img.style, { display: 'block', width: '128px', height: '128px',
                             imageRendering: 'pixelated' });
  const said = document.createElement('div');
  said.style.maxWidth = '128px';
  box.append(img, said);
  document.body.appendChild(box);
  return box;
}

function show(chart, event) {
  const point = event && event.points && event.points[0];
  const head = point && point.customdata && point.customdata[0];
  const pictures = (window.__atlasPictures || {})[chart.dataset.atlasPictures];
  const src = pictures && pictures.pictures[head];
  const box = tip();
  if (!src) { box.style.display = 'none'; return; }
  const [img, said] = box.children;
  img.src = src;
  img.alt = 'head ' + head;
  said.textContent = `head ${head}: ${pictures.caption}`;
  box.dataset.head = head;
  box.style.display = 'block';
  // Below the pointer, clear of plotly's own label (which sits beside the point, centred on
  // it); above it when there is no room below.
  const mouse = event.event || {};
  const px = mouse.clientX || 0, py = mouse.clientY || 0;
  const below = py + CLEAR, above = py - CLEAR - box.offsetHeight;
  const fits = below + box.offsetHeight <= window.innerHeight - 4;
  box.style.left = Math.max(4, Math.min(px + 8, window.innerWidth - box.offsetWidth - 4)) + 'px';
  box.style.top = Math.max(4, fits ? below : above) + 'px';
}

export default function(component) {
  const { data, setTriggerValue } = component;
  const store = (window.__atlasPictures = window.__atlasPictures || {});
  if (data.pictures) store[data.id] = { pictures: data.pictures, caption: data.caption };
  if (!store[data.id]) {
    setTriggerValue('missing', true);  // drawn afresh (a new page): ask for the pictures
    return undefined;
  }
  const attach = () => {
    const chart = document.querySelector(`.st-key-${CSS.escape(data.chart)} .js-plotly-plot`);
    if (!chart || typeof chart.on !== 'function') return;
    chart.dataset.atlasPictures = data.id;
    if (chart.__atlasPicturesBound) return;
    chart.__atlasPicturesBound = true;
    chart.on('plotly_hover', (event) => show(chart, event));
    chart.on('plotly_unhover', () => { tip().style.display = 'none'; });
  };
  attach();
  const timer = window.setInterval(attach, EVERY_MS);  // the chart may be drawn after this
  return () => window.clearInterval(timer);
}
