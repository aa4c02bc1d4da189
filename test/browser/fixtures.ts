// The fixture Cloudflare's template specs import as "./fixtures": `templateUrl` is the
// URL of the Worker deployed on the cluster (TEMPLATE_URL, set by internal/testenv
// RunSpec), where upstream's fixture starts `wrangler dev` instead.
import { test as base, expect } from "@playwright/test";

export interface TemplateFixtures {
	templateUrl: string;
}

export const test = base.extend<TemplateFixtures>({
	templateUrl: async ({}, use) => {
		const url = process.env.TEMPLATE_URL;
		if (!url) {
			throw new Error("TEMPLATE_URL is not set: run the spec with internal/testenv RunSpec");
		}
		await use(url);
	},
});

export { expect };
