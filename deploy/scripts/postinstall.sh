#!/bin/sh
# Runs after the package's files are installed or upgraded. Units are not
# enabled here: a master and each worker instance need settings first.
# On an upgrade the running services are restarted, so they run the new binary.
set -e

# Env files are read by systemd as root; a config file given by SM_CONFIG is
# read by the service itself, so the directory is the group's to read.
install -d -m 0750 -o root -g schedulemaster /etc/schedulemaster

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	# deb: "configure <old version>" on an upgrade; rpm: $1 >= 2 on an upgrade.
	upgrade=
	case "$1" in
	configure) [ -n "$2" ] && upgrade=1 ;;
	[0-9]*) [ "$1" -ge 2 ] && upgrade=1 ;;
	esac
	if [ -n "$upgrade" ]; then
		systemctl try-restart 'schedulemaster-master.service' 'schedulemaster-worker@*.service' >/dev/null 2>&1 || true
	else
		cat <<'MSG'
ScheduleMaster is installed. To run a master:
  cp /etc/schedulemaster/master.env.example /etc/schedulemaster/master.env   # then edit it
  systemctl enable --now schedulemaster-master
To run a worker instance "billing" (label pool=billing):
  cp /etc/schedulemaster/worker.env.example /etc/schedulemaster/worker-billing.env   # then edit it
  systemctl enable --now schedulemaster-worker@billing
MSG
	fi
fi
exit 0
