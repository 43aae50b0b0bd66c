#!/bin/sh
# Runs before the package's files are removed: on a removal (not an upgrade)
# the services stop and are disabled. A worker's stop drains its runs first.
set -e

# deb: "remove"; rpm: $1 = 0 on a removal, 1 on an upgrade.
if [ "$1" = "remove" ] || [ "$1" = "0" ]; then
	if [ -d /run/systemd/system ]; then
		systemctl disable --now 'schedulemaster-master.service' >/dev/null 2>&1 || true
		for unit in $(systemctl list-units --plain --no-legend --all 'schedulemaster-worker@*.service' 2>/dev/null | awk '{print $1}'); do
			systemctl disable --now "$unit" >/dev/null 2>&1 || true
		done
	fi
fi
exit 0
