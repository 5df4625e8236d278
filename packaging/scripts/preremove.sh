#!/bin/sh
# cairn package: before removal, stop and disable the service. On an upgrade
# nothing is stopped: the new package's postinstall restarts it.
# Nothing here touches /var/lib/cairn or any workspace store.
#
# Arguments: deb `remove` or `upgrade <new-version>`; rpm `0` on removal,
# `1` on upgrade.

case "$1" in
remove | deconfigure | 0) ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl disable --now cairn.service >/dev/null 2>&1 || true
elif [ -x /etc/init.d/cairn ]; then
	if command -v service >/dev/null 2>&1; then
		service cairn stop || true
	else
		/etc/init.d/cairn stop || true
	fi
	echo "cairn: stopped; /etc/init.d/cairn (written by 'cairn service install') is not part of the"
	echo "package and stays: remove it with 'cairn service uninstall' before removing the package,"
	echo "or by hand (rm /etc/init.d/cairn; update-rc.d cairn remove)."
fi
exit 0
