#!/bin/sh
# cairn: the cairn checkpoint daemon, as a SysV init script (machines without systemd).
# Rendered by cairn (platform/service); `cairn service install` writes it.
### BEGIN INIT INFO
# Provides:          cairn
# Required-Start:    $local_fs $remote_fs
# Required-Stop:     $local_fs $remote_fs
# Default-Start:     2 3 4 5
# Default-Stop:      0 1 6
# Short-Description: cairn checkpoint daemon
### END INIT INFO
# chkconfig: 2345 90 10
# description: cairn checkpoint daemon

name='cairn'
daemon='/usr/bin/cairn'
config='/etc/cairn/config.toml'
log_file='/var/log/cairn/cairn.log'
pid_file=/var/run/$name.pid
stop_wait=30

# Settings such as CAIRN_LOG_LEVEL may be exported from here.
[ -r "/etc/default/$name" ] && . "/etc/default/$name"

# is_running: the pid file names a live process (a zombie left unreaped counts as gone).
is_running() {
    [ -f "$pid_file" ] || return 1
    pid=$(cat "$pid_file" 2>/dev/null)
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

case "$1" in
    start)
        if is_running; then
            echo "Already running (pid $(cat "$pid_file"))"
            exit 0
        fi
        mkdir -p "$(dirname "$log_file")"
        # JSON lines (zerolog) are appended to the log file.
        "$daemon" daemon --config "$config" --service </dev/null >>"$log_file" 2>&1 &
        echo $! >"$pid_file"
        sleep 1
        if ! is_running; then
            rm -f "$pid_file"
            echo "Unable to start $name, see $log_file"
            exit 1
        fi
        echo "Started $name (pid $(cat "$pid_file"))"
        ;;
    stop)
        if ! is_running; then
            rm -f "$pid_file"
            echo "Not running"
            exit 0
        fi
        kill -TERM "$(cat "$pid_file")"
        i=0
        while is_running && [ $i -lt $((stop_wait * 10)) ]; do
            sleep 0.1
            i=$((i + 1))
        done
        if is_running; then
            echo "Not stopped after ${stop_wait}s; see $log_file"
            exit 1
        fi
        rm -f "$pid_file"
        echo "Stopped"
        ;;
    restart|force-reload)
        "$0" stop || exit 1
        "$0" start
        ;;
    reload)
        is_running && kill -HUP "$(cat "$pid_file")"
        ;;
    status)
        if is_running; then
            echo "Running (pid $(cat "$pid_file"))"
            exit 0
        fi
        echo "Stopped"
        exit 3
        ;;
    *)
        echo "Usage: $0 {start|stop|restart|reload|status}"
        exit 2
        ;;
esac
exit 0
