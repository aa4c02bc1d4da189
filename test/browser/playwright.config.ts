// Runs one of Cloudflare's template specs (PLAYWRIGHT_SPEC, an absolute path, read in
// place) in Debian's Chromium (CHROMIUM), with ./fixtures.ts standing in for the
// "./fixtures" module the spec imports. internal/testenv RunSpec sets the environment.
import Module from "node:module";
import path from "node:path";

const spec = process.env.PLAYWRIGHT_SPEC ?? "";
const specDir = path.dirname(spec);
const fixtures = path.join(__dirname, "fixtures.ts");

// The spec sits in a read-only directory beside upstream's fixture, and imports
// "./fixtures" relative to itself: resolve that one import to ours. Playwright loads this
// file in its runner and in every worker process, so each gets the mapping.
const M = Module as unknown as { _resolveFilename: (request: string, parent?: { filename?: string }, ...rest: unknown[]) => string };
const resolve = M._resolveFilename;
M._resolveFilename = function (request, parent, ...rest) {
	if (parent?.filename && path.dirname(parent.filename) === specDir &&
		path.resolve(specDir, request).replace(/\.ts$/, "") === path.join(specDir, "fixtures")) {
		request = fixtures;
	}
	return resolve.call(this, request, parent, ...rest);
};

export default {
	testDir: specDir,
	testMatch: path.basename(spec),
	outputDir: process.env.PLAYWRIGHT_OUTPUT_DIR,
	workers: 1,
	retries: 0,
	forbidOnly: true,
	reporter: [["list"]],
	use: {
		browserName: "chromium",
		headless: true,
		// Debian's Chromium, never a browser Playwright downloads.
		launchOptions: { executablePath: process.env.CHROMIUM },
		trace: "off",
	},
};
