// The schedule app: needs no account (its `$auth` is empty). Sluice's schedule sources take a
// timer interface and do not import this file; it is here for the registry's layout, where every
// app folder holds `<app>.app.mjs`, and for components that add it as a prop.
export default {
  type: "app",
  app: "schedule",
  propDefinitions: {},
  methods: {},
};
