import { SchedulerClient } from "@aws-sdk/client-scheduler";
import type { AwsPart } from "../composition.ts";
import { lazy, required } from "../lazy-ports.ts";
import { SchedulerTimers } from "../scheduler-timers.ts";

/** Sources' timers (EventBridge Scheduler): functions that deploy sources. */
export const part: AwsPart = {
  name: "timers",
  build({ compute, client }) {
    return {
      timers: lazy("the timers", () => {
        const schedules = required(compute.schedules, "the timers", "the schedules' settings (access.compute)");
        return new SchedulerTimers({
          scheduler: client("scheduler", () => new SchedulerClient({})),
          groupName: schedules.scheduleGroup,
          timerInvokerArn: schedules.timerInvokerArn,
          roleArn: schedules.schedulerRoleArn,
        });
      }),
    };
  },
};
