// uPlot is served from node_modules as /ui/vendor/uPlot.esm.js (packages/dashboard/src/assets.ts);
// this gives the compiler its types for that path.
import uPlot from 'uplot';
export default uPlot;
