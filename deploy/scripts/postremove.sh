#!/bin/sh
# Runs after the package's files are removed. The data in
# /var/lib/schedulemaster, the settings in /etc/schedulemaster and the user
# stay: a database is never deleted by a package manager.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
