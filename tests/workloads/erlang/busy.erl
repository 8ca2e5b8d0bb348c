%% main -> outer -> middle -> inner -> spin for SECONDS, each a real call
%% (none in tail position but spin's loop), so that each keeps its frame;
%% with COUNT, in COUNT processes each running worker -> outer -> ...
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
