%% main -> outer -> middle -> inner -> spin for SECONDS, each a real call
%% (none in tail position but spin's loop), so that each keeps its frame;
%% with COUNT, in COUNT processes each running worker -> outer -> ...;
%% with COUNT and BUSY, COUNT processes waiting in receive and BUSY running
%% worker -> outer -> ..., spawned after 40,000 others have come and gone
%% (so that their pids' serials are above 0 where the release's pid
%% numbers wrap), each saying its pid: "busy <0.N.S>".
-module(busy).
-export([main/1]).

main([Seconds]) ->
    io:format("ready~n"),
    outer(deadline(Seconds), 0),
    halt(0);
main([Seconds, Count]) ->
    Until = deadline(Seconds),
    Parent = self(),
    N = list_to_integer(atom_to_list(Count)),
    [spawn(fun() -> worker(Until, Parent) end) || _ <- lists:seq(1, N)],
    io:format("ready~n"),
    wait(N),
    halt(0);
main([Seconds, Count, Busy]) ->
    Until = deadline(Seconds),
    Parent = self(),
    Gone = [spawn_monitor(fun() -> ok end) || _ <- lists:seq(1, 40000)],
    [receive {'DOWN', Ref, process, Pid, _} -> ok end || {Pid, Ref} <- Gone],
    [spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, list_to_integer(atom_to_list(Count)))],
    N = list_to_integer(atom_to_list(Busy)),
    Workers = [spawn(fun() -> worker(Until, Parent) end) || _ <- lists:seq(1, N)],
    [io:format("busy ~s~n", [pid_to_list(W)]) || W <- Workers],
    io:format("ready~n"),
    wait(N),
    halt(0).

deadline(Seconds) ->
    erlang:monotonic_time(millisecond) + list_to_integer(atom_to_list(Seconds)) * 1000.

worker(Until, Parent) ->
    outer(Until, 0),
    Parent ! done.

wait(0) -> ok;
wait(N) -> receive done -> wait(N - 1) end.

outer(Until, N) ->
    M = middle(N) + 1,
    case erlang:monotonic_time(millisecond) < Until of
        true -> outer(Until, M rem 1000003);
        false -> M
    end.

middle(N) -> inner(N) + 1.

inner(N) -> spin(N, 200000) + 1.

spin(N, 0) -> N;
spin(N, K) -> spin((N * 7 + K) rem 1000003, K - 1).
