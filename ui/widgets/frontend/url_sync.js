// Keeps the address bar on the view's query string (replaceState), so a link opens this view.
//
// Streamlit puts back the query string a run started with once that run ends, which may be long
// after this view was drawn (a fragment inside a page that keeps computing), so the query is
// checked again every half second for as long as this view is the newest one on this page.

const EVERY_MS = 500;

export default function(component) {
  const wanted = new URLSearchParams(component.data.query).toString();
  const path = window.location.pathname;
  window.__atlasWantedQuery = wanted;
  let timer = null;
  const apply = () => {
    const current = window.__atlasWantedQuery === wanted && window.location.pathname === path;
    if (!current) {  // a newer view, or another page, has taken over
      window.clearInterval(timer);
      return;
    }
    const url = new URL(window.location.href);
    if (url.searchParams.toString() !== wanted) {
      url.search = wanted;
      window.history.replaceState(window.history.state, '', url);
    }
  };
  apply();
  timer = window.setInterval(apply, EVERY_MS);
  return () => window.clearInterval(timer);
}
