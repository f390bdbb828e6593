export default {
  key: "schedule-custom-interval",
  name: "Custom Interval",
  description: "Emit an event every N seconds, minutes or hours. Defaults to every 15 minutes.",
  version: "0.0.1",
  type: "source",
  dedupe: "unique",
  props: {
    timer: {
      type: "$.interface.timer",
      label: "Interval",
      description: "How often to emit an event",
      default: {
        intervalSeconds: 60 * 15,
      },
    },
  },
  async run(event) {
    // Manual runs carry no timestamp: fall back to now (epoch seconds, like timer events).
    const timestamp = event?.timestamp ?? Math.floor(Date.now() / 1000);
    this.$emit(
      {
        timestamp,
      },
      {
        id: timestamp,
        summary: `Timer fired at ${new Date(timestamp * 1000).toISOString()}`,
        ts: timestamp * 1000,
      },
    );
  },
};
