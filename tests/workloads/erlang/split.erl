%% Three leaves called in turn, with 5, 3 and 2 units of work a round
%% (50/30/20), for SECONDS, then the rounds run said
%% (scripts/bench/reference_cost.py); with a log FILE, under eprof, whose
%% own-time table is written there.
-module(split).
-export([main/1]).

main([Seconds]) ->
    io:format("ready~n"),
    io:format("rounds ~p~n", [rounds(deadline(Seconds), 0)]),
    halt(0);
main([Seconds, Log]) ->
    {ok, _} = eprof:start(),
    io:format("ready~n"),
    Until = deadline(Seconds),
    {ok, Rounds} = eprof:profile([], fun() -> rounds(Until, 0) end),
    io:format("rounds ~p~n", [Rounds]),
    ok = eprof:log(atom_to_list(Log)),
    eprof:analyze(total),
    halt(0).

deadline(Seconds) ->
    erlang:monotonic_time(millisecond) + list_to_integer(atom_to_list(Seconds)) * 1000.

rounds(Until, N) ->
    fifty(500, 0),
    thirty(300, 0),
    twenty(200, 0),
    case erlang:monotonic_time(millisecond) < Until of
        true -> rounds(Until, N + 1);
        false -> N + 1
    end.

fifty(0, A) -> A;
fifty(K, A) -> fifty(K - 1, (A * 7 + K) rem 1000003).

thirty(0, A) -> A;
thirty(K, A) -> thirty(K - 1, (A * 7 + K) rem 1000003).

twenty(0, A) -> A;
twenty(K, A) -> twenty(K - 1, (A * 7 + K) rem 1000003).
