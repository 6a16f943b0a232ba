/* The flight-recorder file a failed, stalled or interrupted job leaves
 * behind: every rank's last calls, as the reporting rank collected them
 * (comm/watchdog.h). Schema: reports/flight.schema.json. */
#ifndef SB_FLIGHT_REPORT_H
#define SB_FLIGHT_REPORT_H

#include <stddef.h>

#include "comm/watchdog.h"
#include "core/status.h"

#define SB_FLIGHT_SCHEMA_VERSION "1.0"

/* The file's path: "<report>.flight.json" when report_path is set, else
 * "stratbench-<UTC time>-<pid>.flight.json" in the working directory. */
void sb_flight_report_path(const char *report_path, char *out, size_t len);

/* Writes fault `f` (the collected record) with the one-line `message` to
 * `path`, atomically. Errors: SB_ERR_IO naming the path, SB_ERR_NOMEM. */
sb_status sb_flight_report_write(const char *path, const struct sb_fault *f,
                                 const char *message);

#endif
