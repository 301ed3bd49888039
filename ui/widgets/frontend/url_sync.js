// Keeps the address bar on the view's query string (replaceState), so a link opens this view.

export default function(component) {
  const wanted = new URLSearchParams(component.data.query).toString();
  window.__atlasWantedQuery = wanted;
  const apply = () => {
    if (window.__atlasWantedQuery !== wanted) return;  // a newer view has taken over
    const url = new URL(window.location.href);
    if (url.searchParams.toString() !== wanted) {
      url.search = wanted;
      window.history.replaceState(window.history.state, '', url);
    }
  };
  apply();
  // Streamlit restores the query string it started the rerun with once the run ends.
  [300, 1000, 2500].forEach((ms) => setTimeout(apply, ms));
}
