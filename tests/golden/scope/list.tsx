import React, { useState } from "react";

type Props = { items: string[]; onPick: (item: string) => void };

export function PickList({ items, onPick }: Props) {
  const [filter, setFilter] = useState("");
  const shown = items.filter((item) => item.includes(filter));
  return (
    <ul>
      <input value={filter} onChange={(e) => setFilter(e.target.value)} />
      {shown.map((item) => (
        <li key={item} onClick={() => onPick(item)}>
          {item}
        </li>
      ))}
    </ul>
  );
}

export const Empty = () => {
  return <p>nothing</p>;
};
